/* Mono thread registration for Ember's engine threads (the binding's thread hooks).
 *
 * Without hooks, Mono registers an engine thread implicitly on its first callback and only
 * unregisters it from a pthread key destructor while the thread is already being torn down.
 * The binding registers each engine thread when it starts (a managed start hook: Mono's
 * callback wrapper attaches the thread and leaves it in the state a thread blocked in native
 * code must be in, so the GC never waits for it), and this stop hook unregisters it before it
 * ends, from native code: a thread cannot detach itself while a managed frame is on its
 * stack, so the detach must not happen inside a managed callback.
 *
 * The Mono embedding functions are looked up in the running process (the mono executable or
 * libmonosgen exports them); nothing here links against Mono. Built by build.sh into
 * libember_mono.so; the binding uses it only when it loads (that is, under Mono).
 */
#include <dlfcn.h>
#include <stddef.h>

typedef void *(*attach_fn)(void *domain);
typedef void *(*root_fn)(void);
typedef void (*detach_fn)(void *thread);
typedef void (*managed_fn)(int starting);
typedef void *(*unsafe_fn)(void **stackdata);

static attach_fn p_attach;
static root_fn p_root;
static detach_fn p_detach;
static managed_fn p_managed;
static unsafe_fn p_enter_unsafe;

/* Resolves the Mono functions and remembers the managed callback run first (it forgets the
 * thread on the managed side). Returns 0 when everything was found, -1 otherwise. */
int ember_mono_init(managed_fn managed)
{
    p_attach = (attach_fn)dlsym(RTLD_DEFAULT, "mono_thread_attach");
    p_root = (root_fn)dlsym(RTLD_DEFAULT, "mono_get_root_domain");
    p_detach = (detach_fn)dlsym(RTLD_DEFAULT, "mono_thread_detach");
    p_enter_unsafe = (unsafe_fn)dlsym(RTLD_DEFAULT, "mono_threads_enter_gc_unsafe_region");
    p_managed = managed;
    return (p_attach && p_root && p_detach && p_enter_unsafe && p_managed) ? 0 : -1;
}

/* Set once process exit begins: an engine thread ending after that stays out of the runtime.
 * Entering managed code while Mono shuts down can block the thread for good (and with it the
 * engine's stop, which joins it); at exit, unregistering no longer matters. */
static volatile int exiting;

void ember_mono_exiting(void)
{
    __atomic_store_n(&exiting, 1, __ATOMIC_SEQ_CST);
}

static void thread_stop(void *user_data)
{
    void *thread;
    void *stackdata;
    (void)user_data;
    if (__atomic_load_n(&exiting, __ATOMIC_SEQ_CST)) return;
    p_managed(0);
    /* Back in native code: no managed frame is left on this thread's stack. Between callbacks
     * the thread has no current domain; attaching an attached thread only sets the domain
     * again and returns its thread object, which detach needs. Like every embedding call,
     * these expect the thread in GC-unsafe mode (after a callback it is in GC-safe mode);
     * it is not left again: after the detach the runtime no longer tracks this thread. */
    p_enter_unsafe(&stackdata);
    thread = p_attach(p_root());
    if (thread != NULL) p_detach(thread);
}

/* The stop hook, for ember_server_set_thread_hooks. */
void *ember_mono_stop_hook(void)
{
    return (void *)thread_stop;
}
