"""The behaviour modules, one per behaviour (``test_<behaviour_id>.py``).

A package, so the wheel carries it beside ``suite`` and ``pytest --pyargs cases`` runs
the installed cases from any directory."""
