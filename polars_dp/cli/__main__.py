import sys

from polars_dp.cli import main

sys.exit(main())
