from perfkit.cli.main import main

main()
