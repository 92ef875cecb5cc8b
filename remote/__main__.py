import sys

from remote.cli import main

sys.exit(main())
