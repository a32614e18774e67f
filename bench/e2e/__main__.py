import sys

from bench.e2e.run import main

sys.exit(main())
