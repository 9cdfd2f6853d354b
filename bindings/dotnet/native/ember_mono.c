/* Mono thread registration for Ember's engine threads (the binding's thread hooks).
 *
 * Without hooks, Mono registers an engine thread implicitly on its first callback and only
 * unregisters it from a pthread key destructor while the thread is already being torn down.
 * These hooks register each engine thread when it starts and unregister it before it ends,
 * from native code: a thread cannot detach itself while a managed frame is on its stack, so
 * the detach must not happen inside a managed callback.
 *
 * The Mono embedding functions are looked up in the running process (the mono executable or
 * libmonosgen exports them); nothing here links against Mono. Built by build.sh into
 * libember_mono.so; the binding uses it only when it loads (that is, under Mono).
 */
#include <dlfcn.h>
#include <stddef.h>

typedef void *(*attach_fn)(void *domain);
typedef void *(*current_fn)(void);
typedef void (*detach_fn)(void *thread);
typedef void *(*root_fn)(void);
typedef void (*managed_fn)(int starting);

static attach_fn p_attach;
static current_fn p_current;
static detach_fn p_detach;
static root_fn p_root;
static managed_fn p_managed;

/* Resolves the Mono functions and remembers the managed callback (it marks the thread as a
 * background thread and counts it). Returns 0 when everything was found, -1 otherwise. */
int ember_mono_init(managed_fn managed)
{
    p_attach = (attach_fn)dlsym(RTLD_DEFAULT, "mono_thread_attach");
    p_current = (current_fn)dlsym(RTLD_DEFAULT, "mono_thread_current");
    p_detach = (detach_fn)dlsym(RTLD_DEFAULT, "mono_thread_detach");
    p_root = (root_fn)dlsym(RTLD_DEFAULT, "mono_get_root_domain");
    p_managed = managed;
    return (p_attach && p_current && p_detach && p_root && p_managed) ? 0 : -1;
}

static void thread_start(void *user_data)
{
    void *domain;
    (void)user_data;
    domain = p_root();
    if (domain == NULL) return;
    p_attach(domain);
    p_managed(1);
}

static void thread_stop(void *user_data)
{
    void *thread;
    (void)user_data;
    p_managed(0);
    /* Back in native code: no managed frame is left on this thread's stack. */
    thread = p_current();
    if (thread != NULL) p_detach(thread);
}

/* The two hook functions, for ember_server_set_thread_hooks. */
void ember_mono_hooks(void **start, void **stop)
{
    *start = (void *)thread_start;
    *stop = (void *)thread_stop;
}
