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
