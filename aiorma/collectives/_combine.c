/* A small message combined into a reduction's buffer in one call: the compiled form of the
 * whole-message step of aiorma/collectives/reduce_ops.py's combiner (see there).
 *
 * numpy's ufunc on a one-element array costs about two microseconds of dispatch, and the typed
 * view of the message's bytes another; an 8-byte allreduce pays both on every rank and round.
 * This loop computes what numpy computes for the ops and types it takes — sums and products of
 * 4- and 8-byte floats and integers, minimum, maximum and the bitwise ops of the integers, which
 * numpy does elementwise in C exactly so (integers wrap) — and declines everything else (False),
 * which the caller then gives to numpy: a float's minimum or maximum (NaN and signed-zero rules),
 * the logical ops, REPLACE and NO_OP, other types.
 *
 * The interpreter lock is held throughout: a few elements need no letting go.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* aiorma.Op's values (aiorma/constants.py), as the accumulate loops of _cpu_atomics.c name them. */
enum { OP_SUM = 1, OP_PROD, OP_MIN, OP_MAX, OP_BAND, OP_BOR, OP_BXOR };
/* The element types, by the code reduce_ops.py gives each numpy dtype. */
enum { TYPE_F64 = 1, TYPE_F32, TYPE_I64, TYPE_I32, TYPE_U64, TYPE_U32 };

/* out[i] = acc[i] OP in[i] for n elements of type T, each moved by memcpy (the arrays may be
 * unaligned); integer arithmetic in the unsigned type U, which wraps as numpy's does. */
#define ARITH(T, U, EXPR)                                                                     \
    for (Py_ssize_t i = 0; i < n; i++) {                                                      \
        T a, b, r;                                                                            \
        memcpy(&a, acc + i * sizeof(T), sizeof(T));                                           \
        memcpy(&b, in + i * sizeof(T), sizeof(T));                                            \
        r = (EXPR);                                                                           \
        memcpy(out + i * sizeof(T), &r, sizeof(T));                                           \
    }

#define INTEGER_OPS(T, U)                                                                     \
    switch (op) {                                                                             \
    case OP_SUM: ARITH(T, U, (T)((U)a + (U)b)) return 1;                                      \
    case OP_PROD: ARITH(T, U, (T)((U)a * (U)b)) return 1;                                     \
    case OP_MIN: ARITH(T, U, a < b ? a : b) return 1;                                         \
    case OP_MAX: ARITH(T, U, a > b ? a : b) return 1;                                         \
    case OP_BAND: ARITH(T, U, a & b) return 1;                                                \
    case OP_BOR: ARITH(T, U, a | b) return 1;                                                 \
    case OP_BXOR: ARITH(T, U, a ^ b) return 1;                                                \
    default: return 0;                                                                        \
    }

#define FLOAT_OPS(T)                                                                          \
    switch (op) {                                                                             \
    case OP_SUM: ARITH(T, T, a + b) return 1;                                                 \
    case OP_PROD: ARITH(T, T, a * b) return 1;                                                \
    default: return 0;                                                                        \
    }

static int
combine(char *out, const char *acc, const char *in, Py_ssize_t n, long op, long type)
{
    switch (type) {
    case TYPE_F64: FLOAT_OPS(double)
    case TYPE_F32: FLOAT_OPS(float)
    case TYPE_I64: INTEGER_OPS(int64_t, uint64_t)
    case TYPE_I32: INTEGER_OPS(int32_t, uint32_t)
    case TYPE_U64: INTEGER_OPS(uint64_t, uint64_t)
    case TYPE_U32: INTEGER_OPS(uint32_t, uint32_t)
    default: return 0;
    }
}

static const Py_ssize_t type_sizes[] = {0, 8, 4, 8, 4, 8, 4};

/* combine_into(out, acc, incoming, op, type): True and out = acc op incoming, element by element
 * (three C-contiguous buffers of as many bytes, out writable; out may be acc), where this loop
 * takes ``op`` (an aiorma.Op value) on ``type`` (a code of reduce_ops.py); else False, nothing
 * written. */
static PyObject *
combine_into(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "combine_into() takes (out, acc, incoming, op, type)");
        return NULL;
    }
    long op = PyLong_AsLong(args[3]);
    if (op == -1 && PyErr_Occurred())
        return NULL;
    long type = PyLong_AsLong(args[4]);
    if (type == -1 && PyErr_Occurred())
        return NULL;
    if (type < TYPE_F64 || type > TYPE_U32)
        Py_RETURN_FALSE;
    Py_buffer out, acc, in;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &acc, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    if (PyObject_GetBuffer(args[2], &in, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&acc);
        PyBuffer_Release(&out);
        return NULL;
    }
    PyObject *result = NULL;
    Py_ssize_t size = type_sizes[type];
    if (out.len != acc.len || out.len != in.len || out.len % size != 0) {
        PyErr_Format(PyExc_ValueError, "combine_into(): buffers of %zd, %zd and %zd bytes, not as many "
                     "whole elements of %zd bytes", out.len, acc.len, in.len, size);
        goto done;
    }
    result = PyBool_FromLong(combine((char *)out.buf, (const char *)acc.buf, (const char *)in.buf,
                                     out.len / size, op, type));
done:
    PyBuffer_Release(&in);
    PyBuffer_Release(&acc);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"combine_into", (PyCFunction)(void (*)(void))combine_into, METH_FASTCALL,
     "combine_into(out, acc, incoming, op, type): True and out = acc op incoming where this loop "
     "takes op on type, else False."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "aiorma.collectives._combine",
    "A small message combined into a reduction's buffer in one call (compiled; see reduce_ops.py).",
    0,
    methods,
};

PyMODINIT_FUNC
PyInit__combine(void)
{
    return PyModule_Create(&module_def);
}
