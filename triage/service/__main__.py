import sys

from triage.service.cli import main

sys.exit(main())
