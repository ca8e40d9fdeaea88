from t1env.cli import console_main

console_main()
