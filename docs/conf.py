"""Sphinx configuration: the dpharness docs (built in CI with -W: every warning is an error)."""

project = "dpharness"
author = "the dpharness developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
exclude_patterns = ["_build", "examples"]
html_theme = "alabaster"
nitpicky = False
