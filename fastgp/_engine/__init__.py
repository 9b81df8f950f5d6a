"""fastgp's engine: all of fastgp's Numba code, its configuration and its
disk-cache stamp, and nothing else (docs/design.md, "The package").

- :mod:`.config`: the ``jit`` / ``parallel_jit`` decorators, the package-wide
  cache stamp and the lock around parallel regions.
- :mod:`.opcodes`: the operation codes of a lowered kernel program.
- :mod:`.vector_math`: vectorisable transcendental functions.
- :mod:`.address_call`: calls through a table of compiled routines'
  addresses (the engine table), so that no caller compiles its callees again.
- :mod:`.signatures`: the fixed signatures of the routines in that table.
- :mod:`.leaves`: each leaf kernel's value and derivatives, one helper each.
- :mod:`.interpreter`: the kernel-program interpreter, one tile at a time, in
  modes (values; theta-, input derivatives; any union), and the engine table.
- :mod:`.passes`: parallel passes over the covariance (fill, gradient trace,
  cross-covariance).
- :mod:`.product_passes`: products of K, or of dK/dtheta, with blocks of
  vectors, and the bilinear gradient forms (no N x N array).
- :mod:`.latent_passes`: the GPLVM's passes (fused theta and input
  derivatives, one interpretation per tile).
- :mod:`.threads`: the Numba and BLAS thread settings of one fit.
- :mod:`.compile_time`: the time Numba spends compiling inside a block (a
  fit's clock leaves it out of an evaluation's time).

Nothing outside this package imports numba. Importing it compiles nothing.
"""
