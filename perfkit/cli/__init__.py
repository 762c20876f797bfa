"""The `perfkit` command line: one module per subcommand."""
