from worldgen.cli import main

raise SystemExit(main())
