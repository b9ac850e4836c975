/* The CPU's own atomic instructions on aligned int64 words, by address: the compiled form of
 * aiorma/transport/mpi/cpu_atomics.py (see there for why and when the transport uses them).
 *
 * The same four operations as the ctypes form, with the same arguments and results, each a
 * single locked instruction (a compare-and-swap loop for fetch_max).  Through ctypes a call costs
 * 1.4-2.4 us on the 2-core VM these numbers come from, more than the lock protocol's own steps;
 * a call of a METH_FASTCALL function costs a tenth of that.
 *
 * Values are taken modulo 2**64 and read back as signed: the words wrap like int64, as they do
 * through ctypes.  The interpreter lock is held throughout: one instruction needs no letting go.
 *
 * One more, which the ctypes form has no counterpart of: store_words, a small put as word stores
 * into a peer's mapped memory (without it, puts stay MPI's).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static int
word_arg(PyObject *arg, int64_t **word)
{
    void *address = PyLong_AsVoidPtr(arg);
    if (address == NULL && PyErr_Occurred())
        return -1;
    if (address == NULL || ((uintptr_t)address & 7) != 0) {
        PyErr_SetString(PyExc_ValueError, "the address of an aligned int64 word is required");
        return -1;
    }
    *word = (int64_t *)address;
    return 0;
}

static int
value_arg(PyObject *arg, int64_t *value)
{
    unsigned long long bits = PyLong_AsUnsignedLongLongMask(arg);
    if (bits == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *value = (int64_t)bits;
    return 0;
}

/* (address, value[, order]): the ctypes form takes the memory order; every call is SEQ_CST. */
static int
word_value_args(PyObject *const *args, Py_ssize_t nargs, const char *name, int64_t **word,
                int64_t *value)
{
    if (nargs != 2 && nargs != 3) {
        PyErr_Format(PyExc_TypeError, "%s() takes (address, value[, order])", name);
        return -1;
    }
    if (nargs == 3 && PyLong_AsLong(args[2]) != __ATOMIC_SEQ_CST) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s(): only the sequentially consistent order (5)", name);
        return -1;
    }
    if (word_arg(args[0], word) < 0 || value_arg(args[1], value) < 0)
        return -1;
    return 0;
}

static PyObject *
exchange(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t *word, value;
    if (word_value_args(args, nargs, "exchange", &word, &value) < 0)
        return NULL;
    return PyLong_FromLongLong(__atomic_exchange_n(word, value, __ATOMIC_SEQ_CST));
}

static PyObject *
fetch_add(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t *word, value;
    if (word_value_args(args, nargs, "fetch_add", &word, &value) < 0)
        return NULL;
    /* Through unsigned arithmetic: wrapping, never signed overflow. */
    return PyLong_FromLongLong(
        (int64_t)__atomic_fetch_add((uint64_t *)word, (uint64_t)value, __ATOMIC_SEQ_CST));
}

static PyObject *
compare_exchange(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t *word, compare, value;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "compare_exchange() takes (address, compare, value)");
        return NULL;
    }
    if (word_arg(args[0], &word) < 0 || value_arg(args[1], &compare) < 0
        || value_arg(args[2], &value) < 0)
        return NULL;
    /* On failure the word's value is written into ``compare``; on success it was ``compare``:
     * the old value either way. */
    __atomic_compare_exchange_n(word, &compare, value, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return PyLong_FromLongLong(compare);
}

static PyObject *
fetch_max(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t *word, value;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "fetch_max() takes (address, value)");
        return NULL;
    }
    if (word_arg(args[0], &word) < 0 || value_arg(args[1], &value) < 0)
        return NULL;
    int64_t old = __atomic_load_n(word, __ATOMIC_SEQ_CST);
    while (old < value
           && !__atomic_compare_exchange_n(word, &old, value, 1, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        ;  /* a failed exchange reloaded ``old`` */
    return PyLong_FromLongLong(old);
}

/* store_words(destination, offset, source): the bytes of ``source`` into ``destination`` from
 * byte ``offset`` on (both C-contiguous buffers, the destination writable), each aligned 8-byte
 * word by one store of its own.  A put into a peer's memory mapped here, where the peer's readers
 * may load a word while it lands (a signal's words, LL words): a copy by memcpy may move a word
 * in pieces (``rep movsb``, overlapping vector moves), one word store never does.  Unaligned
 * copies (no words to keep whole) are a memcpy. */
static PyObject *
store_words(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "store_words() takes (destination, offset, source)");
        return NULL;
    }
    Py_ssize_t offset = PyLong_AsSsize_t(args[1]);
    if (offset == -1 && PyErr_Occurred())
        return NULL;
    Py_buffer out, in;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[2], &in, PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&out);
        return NULL;
    }
    if (offset < 0 || offset > out.len || in.len > out.len - offset) {
        PyErr_Format(PyExc_ValueError, "store_words(): %zd bytes at offset %zd do not fit %zd",
                     in.len, offset, out.len);
        PyBuffer_Release(&in);
        PyBuffer_Release(&out);
        return NULL;
    }
    char *to = (char *)out.buf + offset;
    const char *from = (const char *)in.buf;
    if ((((uintptr_t)to | (uintptr_t)from | (uintptr_t)in.len) & 7) == 0) {
        int64_t *words = (int64_t *)to;
        const int64_t *values = (const int64_t *)from;
        for (Py_ssize_t i = 0; i < in.len / 8; i++)
            __atomic_store_n(&words[i], values[i], __ATOMIC_RELAXED);
    }
    else {
        memcpy(to, from, (size_t)in.len);
    }
    PyBuffer_Release(&in);
    PyBuffer_Release(&out);
    Py_RETURN_NONE;
}

/* accumulate_words(address, type, op, origin, result, compare): MPI's accumulate family on the
 * elements at ``address`` (another process's window memory, mapped here), each element by the
 * CPU's own atomic instruction — a locked add, exchange, and, or, xor, or a compare-and-swap loop
 * around the op's arithmetic.  MPI promises an accumulate atomic per element, which is what this
 * gives; the transport takes this path only for a window where every rank agreed to, so that no
 * element ever sees both this and MPI's own accumulate (MPICH applies its under a mutex, which a
 * locked instruction does not take).
 *
 * ``type``: one of the TYPE_* codes below (cpu_atomics.ELEMENT_TYPES names them by numpy dtype);
 * ``op``: aiorma.Op's value (SUM 1 ... NO_OP 12), or 0 for compare-and-swap; ``origin``: the
 * operand (a buffer; None for NO_OP), ``result``: where the old values go (a writable buffer, or
 * None), ``compare``: compare-and-swap's expected value (a buffer, else None).  The element count
 * is the length of origin, else of result.  Arithmetic as MPI libraries do it in C: integers wrap;
 * MIN (MAX) keeps the target's value only when it is strictly smaller (larger) than the operand;
 * the logical ops give 0 or 1.  The operands may be unaligned (copied in and out by memcpy); the
 * target must be aligned to the element's size (checked). */
enum { OP_CAS = 0, OP_SUM = 1, OP_PROD, OP_MIN, OP_MAX, OP_BAND, OP_BOR, OP_BXOR, OP_LAND,
       OP_LOR, OP_LXOR, OP_REPLACE, OP_NO_OP };
enum { TYPE_I8 = 1, TYPE_I16, TYPE_I32, TYPE_I64, TYPE_U8, TYPE_U16, TYPE_U32, TYPE_U64,
       TYPE_F32, TYPE_F64 };

#define SEQ __ATOMIC_SEQ_CST

/* One integer element: the old value.  UT is the unsigned type of the same width, for
 * wrapping arithmetic without signed overflow. */
#define INTEGER_ELEMENT(NAME, T, UT)                                                         \
    static T NAME(T *word, T operand, T expected, int op)                                   \
    {                                                                                        \
        T old, new_value;                                                                    \
        switch (op) {                                                                        \
        case OP_NO_OP: return __atomic_load_n(word, SEQ);                                     \
        case OP_REPLACE: return __atomic_exchange_n(word, operand, SEQ);                      \
        case OP_SUM: return (T)__atomic_fetch_add((UT *)word, (UT)operand, SEQ);              \
        case OP_BAND: return __atomic_fetch_and(word, operand, SEQ);                          \
        case OP_BOR: return __atomic_fetch_or(word, operand, SEQ);                            \
        case OP_BXOR: return __atomic_fetch_xor(word, operand, SEQ);                          \
        case OP_CAS:                                                                         \
            __atomic_compare_exchange_n(word, &expected, operand, 0, SEQ, SEQ);               \
            return expected;                                                                 \
        }                                                                                    \
        old = __atomic_load_n(word, __ATOMIC_RELAXED);                                        \
        do {                                                                                 \
            switch (op) {                                                                    \
            case OP_PROD: new_value = (T)((UT)old * (UT)operand); break;                     \
            case OP_MIN: new_value = old < operand ? old : operand; break;                   \
            case OP_MAX: new_value = old > operand ? old : operand; break;                   \
            case OP_LAND: new_value = (T)(old && operand); break;                            \
            case OP_LOR: new_value = (T)(old || operand); break;                             \
            default: new_value = (T)(!old != !operand); break; /* OP_LXOR */                 \
            }                                                                                \
        } while (!__atomic_compare_exchange_n(word, &old, new_value, 1, SEQ, SEQ));          \
        return old;                                                                          \
    }

INTEGER_ELEMENT(element_i8, int8_t, uint8_t)
INTEGER_ELEMENT(element_i16, int16_t, uint16_t)
INTEGER_ELEMENT(element_i32, int32_t, uint32_t)
INTEGER_ELEMENT(element_i64, int64_t, uint64_t)
INTEGER_ELEMENT(element_u8, uint8_t, uint8_t)
INTEGER_ELEMENT(element_u16, uint16_t, uint16_t)
INTEGER_ELEMENT(element_u32, uint32_t, uint32_t)
INTEGER_ELEMENT(element_u64, uint64_t, uint64_t)

/* One floating-point element, on its bits (BITS, the unsigned integer of the same width): a
 * load, an exchange, or a compare-and-swap loop around the arithmetic. */
#define FLOAT_ELEMENT(NAME, T, BITS)                                                         \
    static T NAME(T *element, T operand, int op)                                            \
    {                                                                                        \
        BITS *word = (BITS *)element, old_bits, new_bits;                                    \
        T old, new_value;                                                                    \
        if (op == OP_NO_OP || op == OP_REPLACE) {                                            \
            memcpy(&new_bits, &operand, sizeof new_bits);                                    \
            old_bits = op == OP_NO_OP ? __atomic_load_n(word, SEQ)                            \
                                      : __atomic_exchange_n(word, new_bits, SEQ);             \
            memcpy(&old, &old_bits, sizeof old);                                             \
            return old;                                                                      \
        }                                                                                    \
        old_bits = __atomic_load_n(word, __ATOMIC_RELAXED);                                   \
        do {                                                                                 \
            memcpy(&old, &old_bits, sizeof old);                                             \
            switch (op) {                                                                    \
            case OP_SUM: new_value = old + operand; break;                                   \
            case OP_PROD: new_value = old * operand; break;                                  \
            case OP_MIN: new_value = old < operand ? old : operand; break;                   \
            default: new_value = old > operand ? old : operand; break; /* OP_MAX */          \
            }                                                                                \
            memcpy(&new_bits, &new_value, sizeof new_bits);                                  \
        } while (!__atomic_compare_exchange_n(word, &old_bits, new_bits, 1, SEQ, SEQ));      \
        return old;                                                                          \
    }

FLOAT_ELEMENT(element_f32, float, uint32_t)
FLOAT_ELEMENT(element_f64, double, uint64_t)

/* Every element of one type: operands and results through memcpy (they may be unaligned). */
#define INTEGER_LOOP(T, ELEMENT)                                                             \
    for (Py_ssize_t i = 0; i < count; i++) {                                                 \
        T operand = 0, expected = 0, old;                                                    \
        if (in) memcpy(&operand, in + i * sizeof(T), sizeof(T));                             \
        if (cmp) memcpy(&expected, cmp + i * sizeof(T), sizeof(T));                          \
        old = ELEMENT((T *)target + i, operand, expected, op);                               \
        if (out) memcpy(out + i * sizeof(T), &old, sizeof(T));                               \
    }                                                                                        \
    break;
#define FLOAT_LOOP(T, ELEMENT)                                                               \
    for (Py_ssize_t i = 0; i < count; i++) {                                                 \
        T operand = 0, old;                                                                  \
        if (in) memcpy(&operand, in + i * sizeof(T), sizeof(T));                             \
        old = ELEMENT((T *)target + i, operand, op);                                         \
        if (out) memcpy(out + i * sizeof(T), &old, sizeof(T));                               \
    }                                                                                        \
    break;

static const Py_ssize_t type_sizes[] = {0, 1, 2, 4, 8, 1, 2, 4, 8, 4, 8};

static int
optional_buffer(PyObject *arg, Py_buffer *view, int flags)
{
    if (arg == Py_None) {
        view->obj = NULL;
        view->buf = NULL;
        view->len = 0;
        return 0;
    }
    return PyObject_GetBuffer(arg, view, flags | PyBUF_C_CONTIGUOUS);
}

static void
release(Py_buffer *view)
{
    if (view->obj != NULL)
        PyBuffer_Release(view);
}

static PyObject *
accumulate_words(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError,
                        "accumulate_words() takes (address, type, op, origin, result, compare)");
        return NULL;
    }
    void *address = PyLong_AsVoidPtr(args[0]);
    if (address == NULL && PyErr_Occurred())
        return NULL;
    long type = PyLong_AsLong(args[1]), op = PyLong_AsLong(args[2]);
    if (PyErr_Occurred())
        return NULL;
    if (type < TYPE_I8 || type > TYPE_F64 || op < OP_CAS || op > OP_NO_OP
        || (type >= TYPE_F32 && op >= OP_BAND && op <= OP_LXOR) || (type >= TYPE_F32 && op == OP_CAS)) {
        PyErr_Format(PyExc_ValueError, "accumulate_words(): no op %ld on element type %ld", op, type);
        return NULL;
    }
    Py_ssize_t size = type_sizes[type];
    if (address == NULL || ((uintptr_t)address % (uintptr_t)size) != 0) {
        PyErr_SetString(PyExc_ValueError, "accumulate_words(): the target must be aligned to its elements");
        return NULL;
    }
    Py_buffer origin, result, compare;
    if (optional_buffer(args[3], &origin, PyBUF_SIMPLE) < 0)
        return NULL;
    if (optional_buffer(args[4], &result, PyBUF_WRITABLE) < 0) {
        release(&origin);
        return NULL;
    }
    if (optional_buffer(args[5], &compare, PyBUF_SIMPLE) < 0) {
        release(&origin);
        release(&result);
        return NULL;
    }
    Py_ssize_t length = origin.obj != NULL ? origin.len : result.len;
    Py_ssize_t count = length / size;
    if (length % size != 0 || (origin.obj == NULL && op != OP_NO_OP)
        || (result.obj != NULL && result.len != length) || (compare.obj == NULL) != (op != OP_CAS)
        || (compare.obj != NULL && compare.len != length)) {
        PyErr_SetString(PyExc_ValueError, "accumulate_words(): the buffers do not match the op");
        release(&origin);
        release(&result);
        release(&compare);
        return NULL;
    }
    char *target = (char *)address;
    const char *in = (const char *)origin.buf, *cmp = (const char *)compare.buf;
    char *out = (char *)result.buf;
    switch (type) {
    case TYPE_I8: INTEGER_LOOP(int8_t, element_i8)
    case TYPE_I16: INTEGER_LOOP(int16_t, element_i16)
    case TYPE_I32: INTEGER_LOOP(int32_t, element_i32)
    case TYPE_I64: INTEGER_LOOP(int64_t, element_i64)
    case TYPE_U8: INTEGER_LOOP(uint8_t, element_u8)
    case TYPE_U16: INTEGER_LOOP(uint16_t, element_u16)
    case TYPE_U32: INTEGER_LOOP(uint32_t, element_u32)
    case TYPE_U64: INTEGER_LOOP(uint64_t, element_u64)
    case TYPE_F32: FLOAT_LOOP(float, element_f32)
    default: FLOAT_LOOP(double, element_f64)
    }
    release(&origin);
    release(&result);
    release(&compare);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"exchange", (PyCFunction)(void (*)(void))exchange, METH_FASTCALL,
     "exchange(address, value, order=5): store value; the old value."},
    {"fetch_add", (PyCFunction)(void (*)(void))fetch_add, METH_FASTCALL,
     "fetch_add(address, value, order=5): add value (wrapping like int64); the old value."},
    {"compare_exchange", (PyCFunction)(void (*)(void))compare_exchange, METH_FASTCALL,
     "compare_exchange(address, compare, value): store value if the word equals compare; the "
     "old value either way."},
    {"fetch_max", (PyCFunction)(void (*)(void))fetch_max, METH_FASTCALL,
     "fetch_max(address, value): raise the word to value if it is below; the old value."},
    {"store_words", (PyCFunction)(void (*)(void))store_words, METH_FASTCALL,
     "store_words(destination, offset, source): the bytes of source into destination from byte "
     "offset on, each aligned 8-byte word by one store."},
    {"accumulate_words", (PyCFunction)(void (*)(void))accumulate_words, METH_FASTCALL,
     "accumulate_words(address, type, op, origin, result, compare): MPI's accumulate family on "
     "the elements at address, each by an atomic instruction; old values into result."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "aiorma.transport.mpi._cpu_atomics",
    "The CPU's atomic instructions on int64 words by address (compiled; see cpu_atomics.py).",
    0,
    methods,
};

PyMODINIT_FUNC
PyInit__cpu_atomics(void)
{
    return PyModule_Create(&module_def);
}
