from t1train.cli import main

raise SystemExit(main())
