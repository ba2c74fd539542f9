"""Sub-commands of the ``jaxdp`` CLI, one module each (see :mod:`jaxdp.cli`)."""
