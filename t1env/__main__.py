import sys

from t1env.cli import main

sys.exit(main())
