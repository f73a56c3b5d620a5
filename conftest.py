"""What a checkout needs: the suite's pytest plugin, for ``python -m pytest cases`` and
``tests`` run from this directory without the installed entry point (the hooks and
fixtures themselves live in ``suite.plugin`` and ``suite.report.plugin``)."""

pytest_plugins = ["suite.plugin"]
