"""fastgp's engine: all of fastgp's Numba code, its configuration and its
disk-cache stamp, and the thread settings of a fit (docs/design.md, "The
package"; "Numba's cache").

- :mod:`.config`: the ``jit`` / ``parallel_jit`` decorators, the package-wide
  cache stamp and where the cache lives, the lock around parallel regions and
  the start of Numba's threads.
- :mod:`.opcodes`: the operation codes of a lowered kernel program.
- :mod:`.vector_math`: vectorisable transcendental functions.
- :mod:`.address_call`: calls through a table of compiled routines'
  addresses, so that no caller compiles its callees again.
- :mod:`.signatures`: the fixed signatures of the routines called through
  such a table.
- :mod:`.leaves`: each leaf kernel's value and derivatives, one helper each.
- :mod:`.interpreter`: the kernel-program interpreter, one tile at a time, in
  modes (values; theta-, input derivatives; any union), and the engine table
  of its and the leaves' addresses.
- :mod:`.passes`: parallel passes over the covariance (fill, gradient trace,
  cross-covariance).
- :mod:`.product_passes`: products of K, or of dK/dtheta, with blocks of
  vectors, and the bilinear gradient forms (no N x N array).
- :mod:`.latent_passes`: the GPLVM's passes (fused theta and input
  derivatives, one interpretation per tile).
- Vecchia's approximation (docs/design.md, "Vecchia's approximation"):
  :mod:`.lanes`, explicit vector code on 8 float64 lanes;
  :mod:`.vecchia_block`, one point's kernel block and its factor;
  :mod:`.vecchia_batch`, 8 points' blocks at once, with the gradient's
  weights; :mod:`.vecchia_workers`, the work of one position block of rows
  and the table that reaches it; :mod:`.vecchia_passes`, the parallel passes
  and the wrappers the backend calls.
- :mod:`.maxmin`: the loops of the maxmin ordering.
- :mod:`.threads`: the Numba and BLAS thread settings of one fit (no
  compiled code).
- :mod:`.compile_time`: the time Numba spends compiling inside a block (a
  fit's clock leaves it out of an evaluation's time; no compiled code).

Nothing outside this package imports numba. Importing it compiles nothing.
"""
