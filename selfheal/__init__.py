"""The root command line, `selfheal`: the top layer, above the product and the sandbox."""
