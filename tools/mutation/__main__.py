import sys

from tools.mutation.run import main

sys.exit(main())
