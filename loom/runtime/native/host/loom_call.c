/* loom_call: the fast path of a call from Python into a compiled entry point
 * `int32_t f(void *const *args)` (docs/architecture.md, decision 4).
 *
 * A CPython extension module, built at first use (loom/runtime/call_native.py). A `Plan` holds
 * one function's signature in C form: per buffer its exact buffer format, item size, shape,
 * alignment and whether the function writes it; per scalar its C type and range. Calling
 * `plan.run(args)` checks every argument against it with a few comparisons, builds the argument
 * vector on the C stack (so concurrent calls share nothing), releases the GIL for the kernel and
 * returns its status. A misaligned array is copied to aligned memory (on the stack when small)
 * and, if written, back, as the Python path does. When any check fails it returns None without
 * calling anything: the Python path (loom/runtime/call.py) then checks again in detail and
 * raises the clear error, or handles what only it handles (an ndarray subclass, a numpy scalar,
 * an array whose dtype equals the signature's but exports another format, such as 'q' for 'l').
 * The buffers stay exported (each export holds a reference to its array) until the kernel
 * returns.
 *
 * Symbolic shapes (loom/transform/bind_shape_vars.py): a dimension -(j + 1) is the value of the
 * integer scalar parameter j. The parameters from `nargs` on are the implicit shape variables,
 * which no argument gives: the first buffer dimension naming one binds it (within its dtype's
 * range), and every other dimension naming it must equal it. Scalar arguments are converted
 * before the buffers are checked, so a dimension may name one wherever it stands.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int32_t (*loom_entry)(void *const *args);

enum kind { K_BUFFER, K_BOOL, K_INT, K_UINT, K_FLOAT32, K_FLOAT64 };

typedef struct {
    int kind;
    int written;         /* buffers: the function writes it */
    int ndim;            /* buffers */
    Py_ssize_t *shape;   /* buffers: ndim extents; -(j + 1): scalar parameter j's value */
    Py_ssize_t itemsize; /* buffers: bytes per element; integers: bytes of the C type */
    char *format;        /* buffers: the buffer format numpy exports for the dtype */
    uintptr_t alignment; /* buffers: a power of two */
    long long min;       /* K_INT */
    long long max;       /* K_INT */
    unsigned long long umax; /* K_UINT */
} param;

typedef struct {
    PyObject_HEAD
    loom_entry fn;
    PyObject *ndarray; /* the exact type accepted: numpy.ndarray */
    Py_ssize_t count; /* parameters */
    Py_ssize_t nargs; /* arguments: the parameters but the implicit shape variables */
    param *params;
} plan;

#define STACK_PARAMS 16    /* arguments whose vectors live on the C stack */
#define STACK_SCRATCH 4096 /* bytes of aligned copies of small misaligned arrays on the stack */

union slot {
    int8_t i8;
    int16_t i16;
    int32_t i32;
    int64_t i64;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;
    float f32;
    double f64;
    unsigned char b;
};

static void plan_free_params(plan *self) {
    if (!self->params) return;
    for (Py_ssize_t k = 0; k < self->count; k++) {
        PyMem_Free(self->params[k].shape);
        PyMem_Free(self->params[k].format);
    }
    PyMem_Free(self->params);
    self->params = NULL;
}

static void plan_dealloc(plan *self) {
    plan_free_params(self);
    Py_XDECREF(self->ndarray);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Plan(address, ndarray_type, params, nargs=len(params)): params is a sequence of tuples, one
 * per parameter (the last len(params) - nargs are implicit shape variables, "int" or "uint"):
 *   ("buffer", format: str, itemsize, shape: tuple, alignment, written: bool)
 *   ("bool",) | ("int", bytes, min, max) | ("uint", bytes, max) | ("float32",) | ("float64",) */
static int plan_init(plan *self, PyObject *args, PyObject *kwds) {
    unsigned long long address;
    PyObject *ndarray, *specs;
    Py_ssize_t nargs = -1;
    if (kwds && PyDict_Size(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Plan takes no keyword arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "KOO|n", &address, &ndarray, &specs, &nargs)) return -1;
    if (!PyType_Check(ndarray)) {
        PyErr_SetString(PyExc_TypeError, "Plan: ndarray_type must be a type");
        return -1;
    }
    PyObject *seq = PySequence_Fast(specs, "Plan: params must be a sequence");
    if (!seq) return -1;
    plan_free_params(self);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    self->params = PyMem_Calloc(n ? (size_t)n : 1, sizeof(param));
    if (!self->params) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    self->count = n;
    self->nargs = nargs < 0 ? n : nargs;
    if (self->nargs > n) goto bad;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *spec = PySequence_Fast_GET_ITEM(seq, k);
        param *p = &self->params[k];
        const char *kind;
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 1) goto bad;
        kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(spec, 0));
        if (!kind) goto fail;
        if (strcmp(kind, "buffer") == 0) {
            const char *format;
            PyObject *shape;
            unsigned long long alignment;
            int written;
            if (!PyArg_ParseTuple(spec, "ssnOKp", &kind, &format, &p->itemsize, &shape, &alignment,
                                  &written))
                goto fail;
            if (!PyTuple_Check(shape) || alignment == 0 || (alignment & (alignment - 1))) goto bad;
            p->kind = K_BUFFER;
            p->written = written;
            p->alignment = (uintptr_t)alignment;
            p->format = PyMem_Malloc(strlen(format) + 1);
            p->ndim = (int)PyTuple_GET_SIZE(shape);
            p->shape = PyMem_Malloc(sizeof(Py_ssize_t) * (p->ndim ? p->ndim : 1));
            if (!p->format || !p->shape) {
                PyErr_NoMemory();
                goto fail;
            }
            strcpy(p->format, format);
            for (int d = 0; d < p->ndim; d++) {
                p->shape[d] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
                if (p->shape[d] == -1 && PyErr_Occurred()) goto fail;
            }
        } else if (strcmp(kind, "bool") == 0) {
            p->kind = K_BOOL;
        } else if (strcmp(kind, "float32") == 0) {
            p->kind = K_FLOAT32;
        } else if (strcmp(kind, "float64") == 0) {
            p->kind = K_FLOAT64;
        } else if (strcmp(kind, "int") == 0) {
            p->kind = K_INT;
            if (!PyArg_ParseTuple(spec, "snLL", &kind, &p->itemsize, &p->min, &p->max)) goto fail;
        } else if (strcmp(kind, "uint") == 0) {
            p->kind = K_UINT;
            if (!PyArg_ParseTuple(spec, "snK", &kind, &p->itemsize, &p->umax)) goto fail;
        } else {
            goto bad;
        }
        if ((p->kind == K_INT || p->kind == K_UINT) &&
            !(p->itemsize == 1 || p->itemsize == 2 || p->itemsize == 4 || p->itemsize == 8))
            goto bad;
        if (k >= self->nargs && p->kind != K_INT && p->kind != K_UINT) goto bad;
    }
    for (Py_ssize_t k = 0; k < n; k++) { /* a symbolic dimension names an integer scalar */
        const param *p = &self->params[k];
        for (int d = 0; p->kind == K_BUFFER && d < p->ndim; d++) {
            Py_ssize_t j = -p->shape[d] - 1;
            if (p->shape[d] < 0 &&
                (j >= n || (self->params[j].kind != K_INT && self->params[j].kind != K_UINT)))
                goto bad;
        }
    }
    Py_DECREF(seq);
    Py_INCREF(ndarray);
    Py_XSETREF(self->ndarray, ndarray);
    self->fn = (loom_entry)(uintptr_t)address;
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "Plan: a malformed parameter description");
fail:
    Py_DECREF(seq);
    plan_free_params(self);
    self->count = 0;
    return -1;
}

/* A scalar argument into its slot: 1 when it is a plain Python value that fits, 0 otherwise
 * (with no exception set; the Python path then decides). */
static int scalar_slot(const param *p, PyObject *value, union slot *out) {
    if (p->kind == K_FLOAT32 || p->kind == K_FLOAT64) {
        double v;
        if (PyFloat_CheckExact(value)) {
            v = PyFloat_AS_DOUBLE(value);
        } else if (PyLong_CheckExact(value)) {
            v = PyLong_AsDouble(value);
            if (v == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
        } else {
            return 0;
        }
        if (p->kind == K_FLOAT32)
            out->f32 = (float)v;
        else
            out->f64 = v;
        return 1;
    }
    if (p->kind == K_BOOL) {
        if (value == Py_True || value == Py_False) {
            out->b = value == Py_True;
            return 1;
        }
        return 0;
    }
    if (!PyLong_CheckExact(value)) return 0; /* bool is a subclass: refused, as in Python */
    if (p->kind == K_INT) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (overflow || v < p->min || v > p->max) return 0;
        switch (p->itemsize) {
        case 1: out->i8 = (int8_t)v; break;
        case 2: out->i16 = (int16_t)v; break;
        case 4: out->i32 = (int32_t)v; break;
        default: out->i64 = (int64_t)v; break;
        }
        return 1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(value);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear(); /* negative or too large */
        return 0;
    }
    if (v > p->umax) return 0;
    switch (p->itemsize) {
    case 1: out->u8 = (uint8_t)v; break;
    case 2: out->u16 = (uint16_t)v; break;
    case 4: out->u32 = (uint32_t)v; break;
    default: out->u64 = (uint64_t)v; break;
    }
    return 1;
}

/* The value of the integer scalar in `slot`. */
static long long slot_value(const param *p, const union slot *slot) {
    if (p->kind == K_INT) {
        switch (p->itemsize) {
        case 1: return slot->i8;
        case 2: return slot->i16;
        case 4: return slot->i32;
        default: return slot->i64;
        }
    }
    switch (p->itemsize) {
    case 1: return slot->u8;
    case 2: return slot->u16;
    case 4: return slot->u32;
    default: return slot->u64 > LLONG_MAX ? -1 : (long long)slot->u64;
    }
}

/* Binds the shape variable `p` to an array's dimension `v`: 0 when it does not fit its dtype. */
static int bind_slot(const param *p, Py_ssize_t v, union slot *out) {
    if (p->kind == K_INT ? v < p->min || v > p->max : (unsigned long long)v > p->umax) return 0;
    switch (p->itemsize) {
    case 1: out->u8 = (uint8_t)v; break;
    case 2: out->u16 = (uint16_t)v; break;
    case 4: out->u32 = (uint32_t)v; break;
    default: out->u64 = (uint64_t)v; break;
    }
    return 1;
}

/* Whether the array's extents `shape` are the parameter's: a symbolic dimension either binds its
 * shape variable (not bound yet) or must equal its value. */
static int shape_matches(const plan *self, const param *p, const Py_ssize_t *shape,
                         union slot *slots, char *bound) {
    for (int d = 0; d < p->ndim; d++) {
        Py_ssize_t want = p->shape[d];
        if (want >= 0) {
            if (shape[d] != want) return 0;
            continue;
        }
        Py_ssize_t j = -want - 1;
        if (!bound[j]) {
            if (!bind_slot(&self->params[j], shape[d], &slots[j])) return 0;
            bound[j] = 1;
        } else if (slot_value(&self->params[j], &slots[j]) != shape[d]) {
            return 0;
        }
    }
    return 1;
}

/* A buffer argument exported into *view: ALIGNED when it is an exact ndarray with the
 * signature's dtype (format) and shape, C-contiguous, writable if written, and aligned;
 * MISALIGNED when only its alignment is wrong (it is then copied to an aligned temporary, as the
 * Python path does); REFUSED otherwise, with nothing exported and no exception set. */
enum { REFUSED, ALIGNED, MISALIGNED };

static int buffer_view(const plan *self, const param *p, PyObject *value, Py_buffer *view,
                       union slot *slots, char *bound) {
    if ((PyObject *)Py_TYPE(value) != self->ndarray) return REFUSED;
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (p->written ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(value, view, flags) != 0) {
        PyErr_Clear(); /* not contiguous, read-only, or no buffer */
        return REFUSED;
    }
    int ok = view->itemsize == p->itemsize && view->ndim == p->ndim && view->format &&
             strcmp(view->format, p->format) == 0 &&
             shape_matches(self, p, view->shape, slots, bound);
    if (!ok) {
        PyBuffer_Release(view);
        return REFUSED;
    }
    return ((uintptr_t)view->buf & (p->alignment - 1)) == 0 ? ALIGNED : MISALIGNED;
}

/* Whether two buffers overlap when either is written: the kernels assume distinct buffers. */
static int aliased(const plan *self, const Py_buffer *views) {
    for (Py_ssize_t i = 0; i < self->count; i++) {
        if (self->params[i].kind != K_BUFFER) continue;
        const char *a = views[i].buf;
        for (Py_ssize_t j = i + 1; j < self->count; j++) {
            if (self->params[j].kind != K_BUFFER) continue;
            if (!self->params[i].written && !self->params[j].written) continue;
            const char *b = views[j].buf;
            if (a < b + views[j].len && b < a + views[i].len) return 1;
        }
    }
    return 0;
}

/* Aligned copies of the misaligned buffers (their argv slot is NULL until then), laid out in
 * `stack` when they fit (small arrays: no allocation), else in one allocation returned in
 * *heap; 0 when that allocation fails. Runs without the GIL: the buffers stay exported. */
static int copy_in(const plan *self, const Py_buffer *views, void **argv, unsigned char *stack,
                   size_t stack_size, void **heap) {
    size_t need = 0; /* enough for every copy at its alignment */
    for (Py_ssize_t k = 0; k < self->count; k++)
        if (self->params[k].kind == K_BUFFER && !argv[k])
            need += (size_t)views[k].len + self->params[k].alignment;
    unsigned char *base = stack;
    if (need > stack_size) {
        base = malloc(need);
        if (!base) return 0;
        *heap = base;
    }
    uintptr_t cursor = (uintptr_t)base;
    for (Py_ssize_t k = 0; k < self->count; k++) {
        if (self->params[k].kind != K_BUFFER || argv[k]) continue;
        uintptr_t alignment = self->params[k].alignment;
        cursor = (cursor + alignment - 1) & ~(alignment - 1);
        argv[k] = (void *)cursor;
        memcpy(argv[k], views[k].buf, (size_t)views[k].len);
        cursor += (uintptr_t)views[k].len;
    }
    return 1;
}

/* The copies of written buffers back into them (a copy is where argv differs from the buffer). */
static void copy_out(const plan *self, const Py_buffer *views, void *const *argv) {
    for (Py_ssize_t k = 0; k < self->count; k++) {
        const param *p = &self->params[k];
        if (p->kind == K_BUFFER && p->written && argv[k] != views[k].buf)
            memcpy(views[k].buf, argv[k], (size_t)views[k].len);
    }
}

/* plan.run(args: tuple) -> the kernel's status (int), or None when an argument does not pass
 * the fast checks (nothing was called). */
static PyObject *plan_run(plan *self, PyObject *args) {
    if (!PyTuple_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "Plan.run takes a tuple of arguments");
        return NULL;
    }
    Py_ssize_t n = self->count;
    if (PyTuple_GET_SIZE(args) != self->nargs || !self->fn) Py_RETURN_NONE;
    void *argv_stack[STACK_PARAMS];
    Py_buffer views_stack[STACK_PARAMS];
    union slot slots_stack[STACK_PARAMS];
    char bound_stack[STACK_PARAMS];
    void **argv = argv_stack;
    Py_buffer *views = views_stack;
    union slot *slots = slots_stack;
    char *bound = bound_stack;
    if (n > STACK_PARAMS) {
        argv = PyMem_Malloc(sizeof(void *) * n);
        views = PyMem_Malloc(sizeof(Py_buffer) * n);
        slots = PyMem_Malloc(sizeof(union slot) * n);
        bound = PyMem_Malloc(n);
        if (!argv || !views || !slots || !bound) {
            PyMem_Free(argv);
            PyMem_Free(views);
            PyMem_Free(slots);
            PyMem_Free(bound);
            return PyErr_NoMemory();
        }
    }
    int ok = 1, misaligned = 0;
    for (Py_ssize_t k = 0; k < n; k++) { /* scalars first: a dimension may name one */
        const param *p = &self->params[k];
        views[k].obj = NULL; /* no buffer held */
        bound[k] = k < self->nargs;
        if (p->kind == K_BUFFER) continue;
        argv[k] = &slots[k];
        if (ok && k < self->nargs) ok = scalar_slot(p, PyTuple_GET_ITEM(args, k), &slots[k]);
    }
    for (Py_ssize_t k = 0; k < self->nargs && ok; k++) {
        const param *p = &self->params[k];
        if (p->kind != K_BUFFER) continue;
        int found = buffer_view(self, p, PyTuple_GET_ITEM(args, k), &views[k], slots, bound);
        ok = found != REFUSED;
        misaligned |= found == MISALIGNED;
        argv[k] = found == MISALIGNED ? NULL : views[k].buf; /* NULL: copy_in sets it */
    }
    for (Py_ssize_t k = self->nargs; k < n && ok; k++) ok = bound[k]; /* always, once lowered */
    PyObject *result = NULL;
    if (ok && !aliased(self, views)) {
        unsigned char scratch[STACK_SCRATCH];
        void *heap = NULL;
        int32_t status = 0;
        int copied = 1;
        Py_BEGIN_ALLOW_THREADS
        if (misaligned) copied = copy_in(self, views, argv, scratch, sizeof scratch, &heap);
        if (copied) status = self->fn((void *const *)argv);
        if (misaligned && copied) copy_out(self, views, argv);
        free(heap);
        Py_END_ALLOW_THREADS
        result = copied ? PyLong_FromLong(status) : PyErr_NoMemory();
    } else {
        Py_INCREF(Py_None);
        result = Py_None;
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (views[k].obj) PyBuffer_Release(&views[k]);
    if (n > STACK_PARAMS) {
        PyMem_Free(argv);
        PyMem_Free(views);
        PyMem_Free(slots);
        PyMem_Free(bound);
    }
    return result;
}

static PyMethodDef plan_methods[] = {
    {"run", (PyCFunction)plan_run, METH_O,
     "run(args) -> the status of the call, or None when an argument fails the fast checks"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject plan_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "loom_call.Plan",
    .tp_basicsize = sizeof(plan),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Plan(address, ndarray_type, params): the fast checks and call of one function",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)plan_init,
    .tp_dealloc = (destructor)plan_dealloc,
    .tp_methods = plan_methods,
};

static struct PyModuleDef loom_call_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "loom_call",
    .m_doc = "loom's fast call path (loom/runtime/call_native.py)",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit_loom_call(void) {
    if (PyType_Ready(&plan_type) < 0) return NULL;
    PyObject *m = PyModule_Create(&loom_call_module);
    if (!m) return NULL;
    Py_INCREF(&plan_type);
    if (PyModule_AddObject(m, "Plan", (PyObject *)&plan_type) < 0) {
        Py_DECREF(&plan_type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
