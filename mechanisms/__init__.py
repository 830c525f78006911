"""The built-in mechanism catalog and the gallery of known-buggy variants.

Importing this package registers every built-in (``dpharness.registry``). One module per
mechanism: sampler + exact law + docstring with the math."""
