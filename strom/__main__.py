from strom.cli import main

raise SystemExit(main())
