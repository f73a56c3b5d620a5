"""Reports: the pytest plugin that records observations; JSON, Markdown; loading and checks."""
