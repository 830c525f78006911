"""The built-in mechanism catalog and the gallery of known-buggy variants.

Importing this package imports every module in it, so each ``@register`` runs
(``dpharness.registry``). One module per mechanism: sampler + exact law + docstring with the math;
a gallery variant lives beside its correct twin."""

import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
