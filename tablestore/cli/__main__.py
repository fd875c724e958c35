import sys

from tablestore.cli import main

sys.exit(main())
