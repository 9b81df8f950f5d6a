"""Calls into compiled routines through a table of machine-code addresses, so
that a caller compiles without its callees (docs/design.md, "Numba's cache").

Why. Numba compiles a jitted callee into its own LLVM module and then *links
that module into every caller* and optimises the whole again: a routine
called from k places, or through a chain of k jitted helpers, is optimised
k + 1 times, and a parallel pass optimises it once more inside its outlined
``prange`` body. The kernel interpreter with every leaf inside it took about
9 s to compile on its own, and the fused dense pass about 8 s more to
optimise it again: most of a fresh install's first fit.

How. Each callee is compiled once, for one fixed signature
(:func:`compiled_address` gives where its code starts, a plain integer), and
the addresses are gathered in an int64 array, the *table*, that callers
receive as an argument. A caller's code loads an address from the table and
calls it with Numba's own calling convention (:func:`table_call`, the body of
an intrinsic). The caller's module holds only the call: it compiles in a
fraction of the time, and its disk cache holds no copy of the callee. The
price is one indirect call per call, which is nothing beside the work of one
call here (a tile of up to 512 kernel entries), and no inlining across it.

Safety. An address is only valid for the signature it was compiled for, so
the argument types at every call site are checked against that signature
when the caller compiles: a mismatch is a ``TypingError`` naming both, never
a call with the wrong layout. Errors the callee reports (Numba's status
code) are propagated to the caller, as a direct call does.

Without the JIT (``NUMBA_DISABLE_JIT=1``: the engine runs as plain Python,
as the mutation runs of docs/testing.md do) a table holds handles to the
Python functions instead, and :func:`python_table_call` stands for the
intrinsics.
"""

import functools

import numba
from numba.core import cgutils, errors, types

__all__ = ["JIT", "TABLE_TYPE", "compiled_address", "table_call", "python_table_call"]

#: False where Numba's JIT is disabled (``NUMBA_DISABLE_JIT=1``).
JIT = not numba.config.DISABLE_JIT

#: The type of an address table: int64, one dimension, C-contiguous, writeable.
TABLE_TYPE = types.Array(types.int64, 1, "C")


@functools.lru_cache(maxsize=None)
def compiled_address(routine, signature):
    """The address (int) of ``routine`` (a jitted dispatcher) compiled for
    ``signature`` (a Numba signature with its return type), compiling it, or
    loading it from the disk cache, on first use. Valid for the life of the
    process: the dispatcher keeps the compiled code."""
    if not JIT:
        _PYTHON_ROUTINES.append(routine)
        return len(_PYTHON_ROUTINES)  # a handle, never 0
    result = routine.get_compile_result(signature)
    return result.library.get_pointer_to_function(result.fndesc.llvm_func_name)


_PYTHON_ROUTINES = []


def python_table_call(table, slot, *args):
    """Without the JIT: call the Python function whose handle is
    ``table[slot]`` with (table, *args), as the intrinsics' code does."""
    return _PYTHON_ROUTINES[table[slot] - 1](table, *args)


def table_call(table, index, args, signature, offset=0):
    """Type and code-generate a call through ``table[offset + index]``.

    The body of an ``@intrinsic`` whose arguments are the table (int64
    array, :data:`TABLE_TYPE`), then the index (a Numba integer type; None
    where the intrinsic has none and ``offset`` is the slot), then ``args``,
    the Numba types of the remaining arguments. The routine at that slot,
    compiled for ``signature`` (:func:`compiled_address`), is called with
    the table followed by ``args``: every routine in a table takes the table
    first, so that it can call the others. Returns (typed signature, codegen)
    for the intrinsic, or raises TypingError where the types do not match
    the signature.
    """
    args = tuple(types.unliteral(a) for a in args)
    if table != TABLE_TYPE or (table,) + args != tuple(signature.args) or not (
            index is None or isinstance(types.unliteral(index), types.Integer)):
        raise errors.TypingError(
            f"a call through an address table to a routine compiled for {signature} "
            f"got table {table}, index {index} and arguments {args}")
    head = (table,) if index is None else (table, types.unliteral(index))

    def codegen(context, builder, sig, llargs):
        array = context.make_array(table)(context, builder, value=llargs[0])
        slot = context.get_constant(types.intp, offset)
        if index is not None:
            position = context.cast(builder, llargs[1], sig.args[1], types.intp)
            slot = builder.add(slot, position)
        address = builder.load(cgutils.get_item_pointer(context, builder, table, array,
                                                        [slot], wraparound=False))
        function_type = context.call_conv.get_function_type(signature.return_type,
                                                            signature.args)
        pointer = builder.inttoptr(address, function_type.as_pointer())
        status, result = context.call_conv.call_function(
            builder, pointer, signature.return_type, signature.args,
            [llargs[0], *llargs[len(head):]])
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return result

    return signature.return_type(*head, *args), codegen
