"""Calls into a compiled routine through its machine-code address, so that
its callers compile without it (docs/design.md, "Numba's cache").

Why. Numba compiles a jitted callee into its own LLVM module and then *links
that module into every caller* and optimises the whole again: a routine
called from k places, or through a chain of k jitted helpers, is optimised
k + 1 times, and a parallel pass optimises it once more inside its outlined
``prange`` body. The kernel interpreter (``.interpreter.eval_tile``, with every
leaf inside it) takes about 9 s to compile on its own, and the fused dense pass
spent about 8 s more re-optimising it: most of a fresh install's first fit.

How. The callee is compiled once for one fixed signature
(:func:`compiled_address` returns where its code starts, a plain integer that
the caller receives as an argument), and the caller's code calls that
address with Numba's own calling convention (:func:`typed_call`, the code
generator of an intrinsic). The caller's module holds only the call, so it
compiles in a fraction of the time and its disk cache holds no copy of the
callee. The price is one indirect call per call site execution, which is
nothing beside a tile's work (hundreds of entries), and no inlining across
the call, which LLVM did not do for a routine of this size anyway.

Safety. The address is only valid for the signature it was compiled for, so
the types at every call site are checked against that signature when the
caller compiles: a mismatch is a ``TypingError`` naming both, never a call
with the wrong layout. Errors the callee reports (Numba's status code) are
propagated to the caller as a direct call would.
"""

import functools

from numba.core import cgutils, errors, types

__all__ = ["compiled_address", "typed_call"]


@functools.lru_cache(maxsize=None)
def compiled_address(routine, signature):
    """The address (int) of ``routine`` compiled for ``signature`` (a Numba
    signature with a return type), compiling it, or loading it from the disk
    cache, on first use. Valid for the life of the process."""
    result = routine.get_compile_result(signature)
    return result.library.get_pointer_to_function(result.fndesc.llvm_func_name)


def typed_call(address, args, signature):
    """Type and code-generate a call through ``address``: the body of an
    ``@intrinsic`` whose first argument is the address (int64) and whose
    others, with Numba types ``args``, are passed to a routine compiled for
    ``signature`` (:func:`compiled_address`). Returns (typed signature,
    codegen), or raises TypingError where the types do not match."""
    args = tuple(types.unliteral(a) for a in args)
    if types.unliteral(address) != types.int64 or args != tuple(signature.args):
        raise errors.TypingError(
            f"a call through an address compiled for {signature} got "
            f"address {address} and arguments {args}")

    def codegen(context, builder, sig, llargs):
        function_type = context.call_conv.get_function_type(signature.return_type,
                                                            signature.args)
        pointer = builder.inttoptr(llargs[0], function_type.as_pointer())
        status, result = context.call_conv.call_function(
            builder, pointer, signature.return_type, signature.args, llargs[1:])
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return result

    return signature.return_type(types.int64, *args), codegen
