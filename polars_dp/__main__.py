import sys

from polars_dp.cli import main

if __name__ == "__main__":
    sys.exit(main())
