from aguikit.cli import main

raise SystemExit(main())
