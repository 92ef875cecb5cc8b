import sys

from remote.stack.cli import main

sys.exit(main())
