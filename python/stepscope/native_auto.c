/*
 * native_auto.c - what auto mode (stepscope/auto.py) does per training
 * step, in C: the work at the outermost data, forward, backward and
 * optimizer calls, the step boundary, and the DDP gradient clock.
 *
 * auto.py wraps torch's calls in _Outermost objects (native_outer.c) of a
 * kind (AUTO_DATA, ...); at the outermost level such a wrapper calls
 * ss__py_auto_enter and ss__py_auto_exit here instead of Python
 * callbacks.  Everything a plain step needs is done here without a Python
 * call or a Python object: the first step and the data fetches before it,
 * the backward phase, the pacing optimizer and the step boundary (RSS,
 * next step, profile requests), the all-reduce arrival and wait of every
 * DDP, the checksums' step time and due check.  What only some scripts
 * need stays in Python and is called only when it applies (auto.py sets
 * the flags and callbacks with _auto_setup and _auto_flags): the first
 * outermost call of a module object (numerics' instrumenting, generate()),
 * numerics, a checksum that is due, CUDA events, a running profile.
 *
 * The gradient clock: _Clock holds one DDP's arrival state (auto.py's
 * _GradClock keeps the parameters and the hook handles); _Clock.hook(i)
 * makes the C callable registered as parameter i's tensor hook, which
 * notes the time.  _auto_clock_add puts a clock on the list settled at the
 * end of every outermost backward.  When the learning of the last
 * parameter asks for other hooks, the clock calls its Python rehook.
 *
 * All of it runs with the GIL held.  An exception from a Python callback
 * is reported as unraisable and never reaches the program.
 */
#include "native_shared.h"

#include <structmember.h>

#define PENDING_MAX 64 /* data fetches remembered before the first step */
#define SEEN_MAX 16    /* module objects whose first call was handed over */

/* Flags (auto.py's _State sets them through _auto_flags). */
static int f_numerics, f_checksums, f_gpu, f_profiling;

/* Python callbacks (_auto_setup), each called only when it applies. */
enum {
    CB_FORWARD_ROOT, /* (module): its first outermost call */
    CB_GPU_ON,       /* (): torch.cuda was found initialised */
    CB_GPU_BEGIN,    /* () -> token or None */
    CB_GPU_END,      /* (name, token) */
    CB_STEP_END,     /* (): GPU and numerics, before the step ends */
    CB_STEP_BEGUN,   /* (): numerics, a step began */
    CB_BACKWARD,     /* (tensors): numerics, before backward */
    CB_BEFORE_OPT,   /* (): numerics, before the pacing optimizer step */
    CB_AFTER_OPT,    /* (optimizer, step, step_ns): checksums, when due */
    CB_PROFILE,      /* (request_id, ms, dir) a request; () a tick */
    CB_COUNT
};
static const char *const cb_names[CB_COUNT] = {
    "forward_root", "gpu_on", "gpu_begin", "gpu_end", "step_end",
    "step_begun", "backward", "before_optimizer", "after_optimizer",
    "profile"};
static PyObject *cb[CB_COUNT];
static PyObject *cuda_module;   /* torch.cuda: its _initialized */
static PyObject *str_initialized;
static PyObject *gpu_names[5];  /* "gpu_forward", ... by kind */

/* Per-process step state. */
static int started;            /* the first step was begun */
static int64_t pending[PENDING_MAX][2];
static int npending;
static PyObject *pacer;        /* weakref (or the object) pacing steps */
static int coll_open;          /* a DDP all-reduce collective is open */
static PyObject *clocks;       /* list of _Clock settled after backward */
static struct {
    const void *obj, *type;
} seen[SEEN_MAX];
static int nseen;

/* Checksums (_checksum.Checksums): due in a step whose number is a multiple
 * of checksum_every (0: never; set by Python after each checksum), with the
 * running mean of the step time measured here, between the pacing
 * optimizer's step ends.  A pause between two steps counts as at most
 * PAUSE_CAP mean steps (_checksum.PAUSE_CAP). */
#define PAUSE_CAP 4
static int64_t checksum_every = 1;
static int64_t last_end_ns = -1;
static double step_ns;

static ss_name_id id_data, id_backward, id_allreduce, id_all_reduce;

/* Calls CB (ARGS...) for its side effects and returns its result (new
 * reference) or NULL after reporting it as unraisable. */
static PyObject *call(int which, PyObject *const *args, size_t n)
{
    PyObject *f = cb[which];
    if (!f)
        return NULL;
    PyObject *r = PyObject_Vectorcall(f, args, n, NULL);
    if (!r)
        PyErr_WriteUnraisable(f);
    return r;
}

static void call0(int which, PyObject *arg)
{
    PyObject *r = call(which, arg ? &arg : NULL, arg ? 1 : 0);
    Py_XDECREF(r);
}

/* ---- steps ---- */

static void step_begun(void)
{
    started = 1;
    if (f_numerics)
        call0(CB_STEP_BEGUN, NULL);
}

static void first_step(void)
{
    step_begun();
    if (ss__py_auto_begin())
        for (int i = 0; i < npending; i++)
            ss_phase_span(id_data, pending[i][0], pending[i][1]);
    npending = 0;
}

static void step_boundary(void)
{
    ss_memory_sample();
    if (f_gpu || f_numerics)
        call0(CB_STEP_END, NULL);
    ss__py_auto_next();
    step_begun();
    if (f_profiling) {
        call0(CB_PROFILE, NULL);
        return;
    }
    ss_profile_request req;
    if (cb[CB_PROFILE] && ss_profile_poll(&req)) { /* one atomic load */
        PyObject *a = Py_BuildValue("(kks)", (unsigned long)req.request_id,
                                    (unsigned long)req.duration_ms, req.dir);
        if (!a) {
            PyErr_WriteUnraisable(NULL);
            return;
        }
        PyObject *r = PyObject_Call(cb[CB_PROFILE], a, NULL);
        if (!r)
            PyErr_WriteUnraisable(cb[CB_PROFILE]);
        Py_XDECREF(r);
        Py_DECREF(a);
    }
}

/* True when OBJ (an optimizer or a GradScaler) paces the steps: the first
 * one to finish a step does, until it is garbage. */
static int is_pacer(PyObject *obj)
{
    PyObject *cur = NULL;
    if (pacer)
        cur = PyWeakref_CheckRef(pacer) ? PyWeakref_GetObject(pacer) : pacer;
    if (cur && cur != Py_None)
        return cur == obj;
    PyObject *ref = PyWeakref_NewRef(obj, NULL);
    if (!ref) {
        PyErr_Clear(); /* not weakly referable: kept */
        Py_INCREF(obj);
        ref = obj;
    }
    Py_XSETREF(pacer, ref);
    return 1;
}

/* At an outermost compute call: the first step, and a CUDA event when the
 * script uses CUDA.  Returns the event token (new reference) or NULL. */
static PyObject *compute_enter(void)
{
    if (!started)
        first_step();
    if (!f_gpu && cuda_module) {
        PyObject *v = PyObject_GetAttr(cuda_module, str_initialized);
        int on = v ? PyObject_IsTrue(v) : 0;
        Py_XDECREF(v);
        if (on < 0 || !v)
            PyErr_Clear();
        if (on > 0)
            call0(CB_GPU_ON, NULL); /* sets f_gpu */
    }
    if (!f_gpu)
        return NULL;
    PyObject *t = call(CB_GPU_BEGIN, NULL, 0);
    if (t == Py_None)
        Py_CLEAR(t);
    return t;
}

/* After the pacing optimizer's step, still in the step it ends: the step
 * time, and the checksums when due. */
static void checksums(PyObject *optimizer)
{
    int64_t now = ss_now_ns();
    if (last_end_ns >= 0) {
        double dt = (double)(now - last_end_ns);
        if (step_ns <= 0)
            step_ns = dt;
        else
            step_ns = 0.8 * step_ns +
                      0.2 * (dt < PAUSE_CAP * step_ns ? dt : PAUSE_CAP * step_ns);
    }
    int64_t step = ss__py_current_step();
    if (checksum_every > 0 && step >= 0 && step % checksum_every == 0) {
        PyObject *s = PyLong_FromLongLong(step);
        PyObject *t = step_ns > 0 ? PyFloat_FromDouble(step_ns) : Py_NewRef(Py_None);
        if (s && t) {
            PyObject *a[3] = {optimizer, s, t};
            PyObject *r = call(CB_AFTER_OPT, a, 3);
            Py_XDECREF(r);
        } else {
            PyErr_WriteUnraisable(NULL);
        }
        Py_XDECREF(s);
        Py_XDECREF(t);
    }
    last_end_ns = ss_now_ns();
}

static void compute_exit(int kind, PyObject *token)
{
    if (token && f_gpu) {
        PyObject *a[2] = {gpu_names[kind], token};
        PyObject *r = call(CB_GPU_END, a, 2);
        Py_XDECREF(r);
    }
}

/* ---- the gradient clock ---- */

typedef struct {
    PyObject_HEAD
    PyObject *rehook;   /* rehook(index): -1 every hook, else only that one */
    int armed;          /* the last forward prepared an all-reduce */
    int dead;           /* closed: its DDP is gone */
    int has_ns;
    int64_t ns;         /* ss_now_ns() of the latest gradient of this pass */
    Py_ssize_t last;    /* and its parameter's index (-1: none) */
    Py_ssize_t candidate; /* the last parameter being learnt (-1: none) */
    int seen;           /* passes in a row with candidate last */
    int narrow_passes;  /* passes since narrowing */
    Py_ssize_t nparams, nhooks;
    int narrow_after, relearn_every;
} ClockObject;

typedef struct {
    PyObject_HEAD
    ClockObject *clock;
    Py_ssize_t index;
    vectorcallfunc vectorcall;
} HookObject;

static PyTypeObject Clock_Type, Hook_Type;

/* Asks the Python side for other hooks: every one back (INDEX -1: the
 * learning starts again) or only parameter INDEX's (narrowed). */
static void rehook(ClockObject *c, Py_ssize_t index)
{
    if (index < 0) {
        c->candidate = -1;
        c->seen = 0;
    } else {
        c->narrow_passes = 0;
    }
    if (!c->rehook)
        return;
    PyObject *i = PyLong_FromSsize_t(index);
    PyObject *r = i ? PyObject_CallOneArg(c->rehook, i) : NULL;
    if (!r)
        PyErr_WriteUnraisable(c->rehook);
    Py_XDECREF(r);
    Py_XDECREF(i);
}

/* At the end of a backward pass: this clock's arrival into *NS (returns
 * 1) if the pass all-reduced its gradients, else 0.  Learns which
 * parameter is last (see auto.py's _GradClock). */
static int clock_settle(ClockObject *c, int64_t *ns)
{
    int has = c->has_ns, armed = c->armed;
    Py_ssize_t last = c->last;
    *ns = c->ns;
    c->has_ns = 0;
    c->last = -1;
    c->armed = 0;
    if (!armed)
        return 0;
    int narrowed = 0 < c->nhooks && c->nhooks < c->nparams;
    if (!has) {
        if (narrowed)
            rehook(c, -1);
        return 0;
    }
    if (narrowed) {
        if (++c->narrow_passes >= c->relearn_every)
            rehook(c, -1);
    } else {
        if (last == c->candidate) {
            c->seen++;
        } else {
            c->candidate = last;
            c->seen = 1;
        }
        if (c->seen >= c->narrow_after && c->nparams > 1)
            rehook(c, last);
    }
    return 1;
}

static PyObject *Hook_vectorcall(PyObject *self_, PyObject *const *args,
                                 size_t nargsf, PyObject *kwnames)
{
    ClockObject *c = ((HookObject *)self_)->clock;
    if (!c->has_ns && c->armed && !coll_open) {
        /* The pass's first gradient: DDP's bucket all-reduces begin;
         * backward's end leaves them. */
        coll_open = 1;
        ss_collective_begin(id_all_reduce);
    }
    c->ns = ss_now_ns();
    c->has_ns = 1;
    c->last = ((HookObject *)self_)->index;
    Py_RETURN_NONE; /* the gradient is left as it is */
}

static int Hook_traverse(HookObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->clock);
    return 0;
}

static int Hook_clear(HookObject *self)
{
    Py_CLEAR(self->clock);
    return 0;
}

static void Hook_dealloc(HookObject *self)
{
    PyObject_GC_UnTrack(self);
    Hook_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject Hook_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope._native._ClockHook",
    .tp_basicsize = sizeof(HookObject),
    .tp_dealloc = (destructor)Hook_dealloc,
    .tp_vectorcall_offset = offsetof(HookObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A gradient hook of a _Clock: hook(grad) notes the time.",
    .tp_traverse = (traverseproc)Hook_traverse,
    .tp_clear = (inquiry)Hook_clear,
};

static PyObject *Clock_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"nparams", "rehook", "narrow_after",
                             "relearn_every", NULL};
    Py_ssize_t n;
    PyObject *re;
    int narrow_after, relearn;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "nOii:_Clock", kwlist, &n, &re,
                                     &narrow_after, &relearn))
        return NULL;
    if (!PyCallable_Check(re) || n < 0)
        return PyErr_Format(PyExc_TypeError, "_Clock wants a count >= 0 and "
                            "a callable");
    ClockObject *c = (ClockObject *)type->tp_alloc(type, 0);
    if (!c)
        return NULL;
    Py_INCREF(re);
    c->rehook = re;
    c->nparams = n;
    c->last = c->candidate = -1;
    c->narrow_after = narrow_after;
    c->relearn_every = relearn;
    return (PyObject *)c;
}

static int Clock_traverse(ClockObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->rehook);
    return 0;
}

static int Clock_clear(ClockObject *self)
{
    Py_CLEAR(self->rehook);
    return 0;
}

static void Clock_dealloc(ClockObject *self)
{
    PyObject_GC_UnTrack(self);
    Clock_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Clock_hook(ClockObject *self, PyObject *index)
{
    Py_ssize_t i = PyNumber_AsSsize_t(index, PyExc_OverflowError);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || i >= self->nparams)
        return PyErr_Format(PyExc_IndexError, "no parameter %zd", i);
    HookObject *h = PyObject_GC_New(HookObject, &Hook_Type);
    if (!h)
        return NULL;
    Py_INCREF(self);
    h->clock = self;
    h->index = i;
    h->vectorcall = Hook_vectorcall;
    PyObject_GC_Track(h);
    return (PyObject *)h;
}

static PyObject *Clock_settle(ClockObject *self, PyObject *unused)
{
    int64_t ns;
    if (!clock_settle(self, &ns))
        Py_RETURN_NONE;
    return PyLong_FromLongLong(ns);
}

static PyObject *Clock_close(ClockObject *self, PyObject *unused)
{
    self->dead = 1;
    self->nhooks = 0;
    Py_CLEAR(self->rehook);
    Py_RETURN_NONE;
}

static PyObject *Clock_get_ns(ClockObject *self, void *closure)
{
    if (!self->has_ns)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(self->ns);
}

static PyObject *index_or_none(Py_ssize_t i)
{
    if (i < 0)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(i);
}

static PyObject *Clock_get_last(ClockObject *self, void *closure)
{
    return index_or_none(self->last);
}

static PyObject *Clock_get_candidate(ClockObject *self, void *closure)
{
    return index_or_none(self->candidate);
}

static PyObject *Clock_get_armed(ClockObject *self, void *closure)
{
    return PyBool_FromLong(self->armed);
}

static int Clock_set_armed(ClockObject *self, PyObject *v, void *closure)
{
    int on = v ? PyObject_IsTrue(v) : -1;
    if (on < 0) {
        if (!v)
            PyErr_SetString(PyExc_TypeError, "cannot delete armed");
        return -1;
    }
    self->armed = on;
    return 0;
}

static PyMethodDef Clock_methods[] = {
    {"hook", (PyCFunction)Clock_hook, METH_O,
     "hook(i): the C callable to register as parameter i's tensor hook."},
    {"settle", (PyCFunction)Clock_settle, METH_NOARGS,
     "settle(): at the end of a backward pass, the arrival (ns) if the pass "
     "all-reduced, else None; resets the pass and learns."},
    {"close", (PyCFunction)Clock_close, METH_NOARGS,
     "close(): the DDP is gone; the clock is dropped from the list."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef Clock_members[] = {
    {"nhooks", T_PYSSIZET, offsetof(ClockObject, nhooks), 0,
     "parameters hooked now"},
    {"relearn_every", T_INT, offsetof(ClockObject, relearn_every), 0, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyGetSetDef Clock_getset[] = {
    {"armed", (getter)Clock_get_armed, (setter)Clock_set_armed, NULL, NULL},
    {"ns", (getter)Clock_get_ns, NULL, NULL, NULL},
    {"last", (getter)Clock_get_last, NULL, NULL, NULL},
    {"candidate", (getter)Clock_get_candidate, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject Clock_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope._native._Clock",
    .tp_basicsize = sizeof(ClockObject),
    .tp_dealloc = (destructor)Clock_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "_Clock(nparams, rehook, narrow_after, relearn_every): one "
              "DDP's all-reduce arrival state (auto.py's _GradClock).",
    .tp_traverse = (traverseproc)Clock_traverse,
    .tp_clear = (inquiry)Clock_clear,
    .tp_methods = Clock_methods,
    .tp_members = Clock_members,
    .tp_getset = Clock_getset,
    .tp_new = Clock_new,
};

/* The sync point of the next all-reducing backward pass of the open step:
 * "allreduce" for the first, "allreduce.K" for the K-th (K up to
 * SYNC_POINTS; later ones are "allreduce.SYNC_POINTS", whose first
 * arrival is the one kept).  The straggler detector sums a rank's lateness
 * over a step's sync points, so a rank late only after the first (a GAN's
 * generator, between the discriminator's all-reduce and its own; each
 * micro-batch of gradient accumulation without no_sync()) is late all the
 * same.  A name the process's table has no room for is "allreduce". */
#define SYNC_POINTS 8
static ss_name_id name_id(const char *s);
static ss_name_id id_sync_point[SYNC_POINTS]; /* 0: not named yet */
static int64_t sync_step = -1;                /* the step counted */
static int sync_points;                       /* its passes so far */

static ss_name_id next_sync_point(void)
{
    int64_t step = ss__py_current_step();
    if (step != sync_step) {
        sync_step = step;
        sync_points = 0;
    }
    int k = sync_points < SYNC_POINTS ? sync_points++ : SYNC_POINTS - 1;
    if (k == 0)
        return id_allreduce;
    if (!id_sync_point[k]) {
        char name[32];
        snprintf(name, sizeof name, "allreduce.%d", k + 1);
        id_sync_point[k] = name_id(name);
        if (!id_sync_point[k]) {
            PyErr_Clear();
            id_sync_point[k] = id_allreduce;
        }
    }
    return id_sync_point[k];
}

/* At the end of an outermost backward (or one an optimizer step runs,
 * ss__py_auto_closure): for the DDPs that all-reduced in it, the step's
 * next sync point (next_sync_point) at this rank's arrival and the phase
 * "allreduce" from there to now.  Closed clocks are dropped. */
static void allreduce_waited(void)
{
    int64_t arrival = -1, ns;
    Py_ssize_t n = PyList_GET_SIZE(clocks), dead = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        ClockObject *c = (ClockObject *)PyList_GET_ITEM(clocks, i);
        if (c->dead)
            dead++;
        else if (clock_settle(c, &ns) && ns > arrival)
            arrival = ns;
    }
    if (dead) {
        for (Py_ssize_t i = PyList_GET_SIZE(clocks) - 1; i >= 0; i--)
            if (((ClockObject *)PyList_GET_ITEM(clocks, i))->dead &&
                PySequence_DelItem(clocks, i) < 0)
                PyErr_WriteUnraisable(clocks);
    }
    if (arrival >= 0) {
        ss_sync_at(next_sync_point(), arrival);
        ss_phase_span(id_allreduce, arrival, ss_now_ns());
    }
}

/* ---- the outermost calls ---- */

/* The first outermost call of a module object (by address and type) goes
 * to Python once; a full table hands every call over. */
static void forward_root(PyObject *obj)
{
    for (int i = 0; i < nseen; i++)
        if (seen[i].obj == obj && seen[i].type == Py_TYPE(obj))
            return;
    if (nseen < SEEN_MAX) {
        seen[nseen].obj = obj;
        seen[nseen].type = Py_TYPE(obj);
        nseen++;
    }
    call0(CB_FORWARD_ROOT, obj);
}

void ss__py_auto_enter(int kind, PyObject *obj, ss__py_auto_token *t)
{
    t->ns = -1;
    t->gpu = NULL;
    switch (kind) {
    case SS__PY_AUTO_DATA:
        if (!started)
            t->ns = ss_now_ns();
        return;
    case SS__PY_AUTO_FORWARD:
        forward_root(obj);
        break;
    case SS__PY_AUTO_BACKWARD:
        if (f_numerics)
            call0(CB_BACKWARD, obj);
        t->gpu = compute_enter();
        ss_phase_begin(id_backward);
        return;
    case SS__PY_AUTO_OPTIMIZER:
        if (f_numerics && is_pacer(obj))
            call0(CB_BEFORE_OPT, NULL);
        break;
    default:
        break;
    }
    t->gpu = compute_enter();
}

void ss__py_auto_exit(int kind, PyObject *obj, ss__py_auto_token *t,
                      int failed)
{
    switch (kind) {
    case SS__PY_AUTO_DATA:
        if (t->ns >= 0 && npending < PENDING_MAX) {
            pending[npending][0] = t->ns;
            pending[npending][1] = ss_now_ns();
            npending++;
        }
        return;
    case SS__PY_AUTO_BACKWARD:
        /* "backward" ends after its all-reduce wait is recorded, so that
         * the wait nests in it. */
        if (coll_open) {
            coll_open = 0;
            ss_collective_end();
        }
        if (PyList_GET_SIZE(clocks))
            allreduce_waited();
        compute_exit(kind, t->gpu);
        ss_phase_end(id_backward);
        break;
    case SS__PY_AUTO_OPTIMIZER:
        compute_exit(kind, t->gpu);
        if (!failed && is_pacer(obj)) {
            if (f_checksums)
                checksums(obj);
            step_boundary();
        }
        break;
    default:
        compute_exit(kind, t->gpu);
        break;
    }
    Py_CLEAR(t->gpu);
}

void ss__py_auto_closure(int kind, int entering)
{
    if (kind != SS__PY_AUTO_BACKWARD)
        return;
    if (entering) {
        ss_phase_begin(id_backward);
        return;
    }
    if (coll_open) {
        coll_open = 0;
        ss_collective_end();
    }
    if (PyList_GET_SIZE(clocks))
        allreduce_waited();
    ss_phase_end(id_backward);
}

/* ---- DDP's forward ---- */

/* _ArmForward(forward, is_grad_enabled): DDP.forward, which afterwards
 * arms the DDP's _Clock (its instance attribute _stepscope_clock) when the
 * forward prepared an all-reduce: require_backward_grad_sync and
 * is_grad_enabled(). */
typedef struct {
    PyObject_HEAD
    PyObject *func;
    PyObject *grad_enabled;
    vectorcallfunc vectorcall;
} ArmObject;

static PyObject *str_clock_attr, *str_sync_attr;

static PyObject *Arm_vectorcall(PyObject *self_, PyObject *const *args,
                                size_t nargsf, PyObject *kwnames)
{
    PyObject *res = PyObject_Vectorcall(((ArmObject *)self_)->func, args,
                                        nargsf, kwnames);
    if (!res || PyVectorcall_NARGS(nargsf) < 1)
        return res;
    PyObject *dict = PyObject_GenericGetDict(args[0], NULL);
    PyObject *c = dict ? PyDict_GetItemWithError(dict, str_clock_attr) : NULL;
    if (!c || !PyObject_TypeCheck(c, &Clock_Type)) {
        Py_XDECREF(dict);
        PyErr_Clear();
        return res;
    }
    PyObject *sync = PyDict_GetItemWithError(dict, str_sync_attr);
    int on = sync ? PyObject_IsTrue(sync) : 0;
    Py_DECREF(dict); /* the DDP holds it, and C */
    if (on > 0) {
        PyObject *g = PyObject_CallNoArgs(((ArmObject *)self_)->grad_enabled);
        on = g ? PyObject_IsTrue(g) : -1;
        Py_XDECREF(g);
    }
    if (on < 0) {
        PyErr_WriteUnraisable(self_);
        on = 0;
    }
    ((ClockObject *)c)->armed = on;
    return res;
}

static PyObject *Arm_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *func, *grad_enabled;
    if (!PyArg_ParseTuple(args, "OO:_ArmForward", &func, &grad_enabled))
        return NULL;
    if (!PyCallable_Check(func) || !PyCallable_Check(grad_enabled))
        return PyErr_Format(PyExc_TypeError, "_ArmForward wants callables");
    ArmObject *self = (ArmObject *)type->tp_alloc(type, 0);
    if (!self)
        return NULL;
    Py_INCREF(func);
    Py_INCREF(grad_enabled);
    self->func = func;
    self->grad_enabled = grad_enabled;
    self->vectorcall = Arm_vectorcall;
    return (PyObject *)self;
}

static int Arm_traverse(ArmObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->func);
    Py_VISIT(self->grad_enabled);
    return 0;
}

static int Arm_clear(ArmObject *self)
{
    Py_CLEAR(self->func);
    Py_CLEAR(self->grad_enabled);
    return 0;
}

static void Arm_dealloc(ArmObject *self)
{
    PyObject_GC_UnTrack(self);
    Arm_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Arm_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

static PyObject *Arm_getattro(PyObject *self, PyObject *attr)
{
    PyObject *r = PyObject_GenericGetAttr(self, attr);
    if (r || !PyErr_ExceptionMatches(PyExc_AttributeError))
        return r;
    PyErr_Clear();
    return PyObject_GetAttr(((ArmObject *)self)->func, attr);
}

static PyObject *Arm_get_wrapped(ArmObject *self, void *closure)
{
    Py_INCREF(self->func);
    return self->func;
}

static PyGetSetDef Arm_getset[] = {
    {"__wrapped__", (getter)Arm_get_wrapped, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject Arm_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope._native._ArmForward",
    .tp_basicsize = sizeof(ArmObject),
    .tp_dealloc = (destructor)Arm_dealloc,
    .tp_vectorcall_offset = offsetof(ArmObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_getattro = Arm_getattro,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "_ArmForward(forward, is_grad_enabled): DDP.forward, arming "
              "the DDP's _Clock.",
    .tp_traverse = (traverseproc)Arm_traverse,
    .tp_clear = (inquiry)Arm_clear,
    .tp_getset = Arm_getset,
    .tp_descr_get = Arm_descr_get,
    .tp_new = Arm_new,
};

/* ---- module functions ---- */

static ss_name_id name_id(const char *s)
{
    PyObject *o = PyUnicode_FromString(s);
    ss_name_id id = o ? ss__py_name_id(o) : 0;
    Py_XDECREF(o);
    return id;
}

/* _auto_setup(callbacks, cuda): CALLBACKS a dict from cb_names to
 * callables; CUDA torch.cuda (or None), whose _initialized is looked at. */
static PyObject *m_auto_setup(PyObject *m, PyObject *const *args,
                              Py_ssize_t nargs)
{
    if (ss__py_check_nargs("_auto_setup", nargs, 2, 2) < 0)
        return NULL;
    /* The names auto mode records: taken from the process's name table
     * only once auto mode is set up. */
    if (!id_data && (!(id_data = name_id("data")) ||
                     !(id_backward = name_id("backward")) ||
                     !(id_allreduce = name_id("allreduce")) ||
                     !(id_all_reduce = name_id("all_reduce")))) {
        id_data = 0;
        return NULL;
    }
    if (!PyDict_Check(args[0]))
        return PyErr_Format(PyExc_TypeError, "_auto_setup wants a dict");
    for (int i = 0; i < CB_COUNT; i++) {
        PyObject *f = PyDict_GetItemString(args[0], cb_names[i]);
        if (!f || !PyCallable_Check(f))
            return PyErr_Format(PyExc_TypeError, "_auto_setup: no callable "
                                "%s", cb_names[i]);
        Py_INCREF(f);
        Py_XSETREF(cb[i], f);
    }
    PyObject *cuda = args[1] == Py_None ? NULL : args[1];
    Py_XINCREF(cuda);
    Py_XSETREF(cuda_module, cuda);
    Py_RETURN_NONE;
}

/* _auto_flags(numerics, checksums, gpu, profiling): which callbacks apply. */
static PyObject *m_auto_flags(PyObject *m, PyObject *const *args,
                              Py_ssize_t nargs)
{
    if (ss__py_check_nargs("_auto_flags", nargs, 4, 4) < 0)
        return NULL;
    int v[4];
    for (int i = 0; i < 4; i++)
        if ((v[i] = PyObject_IsTrue(args[i])) < 0)
            return NULL;
    f_numerics = v[0];
    f_checksums = v[1];
    f_gpu = v[2];
    f_profiling = v[3];
    Py_RETURN_NONE;
}

/* _auto_checksum_every(n): checksums are due in steps that are multiples
 * of N (0: never). */
static PyObject *m_auto_checksum_every(PyObject *m, PyObject *n)
{
    long long v = PyLong_AsLongLong(n);
    if (v == -1 && PyErr_Occurred())
        return NULL;
    checksum_every = v < 0 ? 0 : v;
    Py_RETURN_NONE;
}

static PyObject *m_auto_clock_add(PyObject *m, PyObject *c)
{
    if (!PyObject_TypeCheck(c, &Clock_Type))
        return PyErr_Format(PyExc_TypeError, "_auto_clock_add wants a "
                            "_Clock");
    if (PyList_Append(clocks, c) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* _auto_state() -> (started, pending data fetches, clocks): for tests. */
static PyObject *m_auto_state(PyObject *m, PyObject *unused)
{
    return Py_BuildValue("(iin)", started, npending,
                         PyList_GET_SIZE(clocks));
}

static PyMethodDef auto_methods[] = {
    {"_auto_setup", (PyCFunction)(void (*)(void))m_auto_setup, METH_FASTCALL,
     NULL},
    {"_auto_flags", (PyCFunction)(void (*)(void))m_auto_flags, METH_FASTCALL,
     NULL},
    {"_auto_clock_add", m_auto_clock_add, METH_O, NULL},
    {"_auto_checksum_every", m_auto_checksum_every, METH_O, NULL},
    {"_auto_state", m_auto_state, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

int ss__py_auto_add(PyObject *m)
{
    static const char *gpu[5] = {NULL, "gpu_forward", "gpu_backward",
                                 "gpu_optimizer", "gpu_rollout"};
    if (!clocks) {
        if (!(clocks = PyList_New(0)) ||
            !(str_initialized = PyUnicode_InternFromString("_initialized")) ||
            !(str_clock_attr =
                  PyUnicode_InternFromString("_stepscope_clock")) ||
            !(str_sync_attr = PyUnicode_InternFromString(
                  "require_backward_grad_sync")))
            return -1;
        for (int i = 1; i < 5; i++)
            if (!(gpu_names[i] = PyUnicode_InternFromString(gpu[i])))
                return -1;
    }
    if (PyType_Ready(&Clock_Type) < 0 || PyType_Ready(&Hook_Type) < 0 ||
        PyType_Ready(&Arm_Type) < 0 ||
        PyModule_AddFunctions(m, auto_methods) < 0 ||
        PyModule_AddObjectRef(m, "_Clock", (PyObject *)&Clock_Type) < 0 ||
        PyModule_AddObjectRef(m, "_ArmForward", (PyObject *)&Arm_Type) < 0 ||
        PyModule_AddIntConstant(m, "AUTO_DATA", SS__PY_AUTO_DATA) < 0 ||
        PyModule_AddIntConstant(m, "AUTO_FORWARD", SS__PY_AUTO_FORWARD) < 0 ||
        PyModule_AddIntConstant(m, "AUTO_BACKWARD", SS__PY_AUTO_BACKWARD) <
            0 ||
        PyModule_AddIntConstant(m, "AUTO_OPTIMIZER", SS__PY_AUTO_OPTIMIZER) <
            0 ||
        PyModule_AddIntConstant(m, "AUTO_ROLLOUT", SS__PY_AUTO_ROLLOUT) < 0)
        return -1;
    return 0;
}
