import sys

from fp8check.cli import main

sys.exit(main())
