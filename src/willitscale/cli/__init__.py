"""The ``willitscale`` command. One module per subcommand; each only parses and prints."""
