/* sup_core_metrics: the node's series for /metrics (see sup_core.h). Reads
 * what the core, the pools and the agent client keep; usage is read from
 * each running sandbox's cgroup and disk now (a handful of small files per
 * sandbox, as GET of one sandbox does). */
#include <stdlib.h>
#include <string.h>

#include "sup_agent.h"
#include "sup_core_int.h"
#include "sup_log.h"

/* What one tenant holds and uses, summed over its sandboxes. */
typedef struct tenant_row {
	const char *name;
	const sup_tenant *t; /* NULL: removed by a reload, sandboxes still running */
	uint64_t sandboxes, cpu_milli, memory_limit, disk_limit;
	sup_usage use;       /* sums; known: figures at least one sandbox gave */
} tenant_row;

static tenant_row *row_of(tenant_row *rows, size_t *n, const char *name)
{
	for (size_t i = 0; i < *n; i++)
		if (strcmp(rows[i].name, name) == 0)
			return &rows[i];
	rows[*n].name = name;
	return &rows[(*n)++];
}

static void use_add(sup_usage *sum, const sup_usage *u)
{
	sum->memory += u->memory;
	sum->cpu_ns += u->cpu_ns;
	sum->pids += u->pids;
	sum->disk += u->disk;
	sum->oom_kills += u->oom_kills;
	sum->known |= u->known;
}

static void family(sup_prom *w, const char *name, const char *type, const char *help)
{
	sup_prom_family(w, name, type, help);
}

static void render_sandboxes(const sup_core_figs *f, sup_prom *w)
{
	static const char *const names[] = { "state", "image", "isolation" };
	sup_ctab *t = sup_ctab_new(3, names, 1024);
	if (!t) {
		w->failed = true;
		return;
	}
	for (const sup_sandbox *sb = f->first; sb; sb = sup_core_next(sb)) {
		const char *v[] = { sup_sb_state_name(sb->state), sup_pools_image_of(sb),
				    sup_isolation_names[sup_pools_isolation_of(sb)] };
		sup_ctab_add(t, v, 1);
	}
	family(w, "sbx_sandboxes", "gauge", "Handed-out sandboxes by state, image and isolation.");
	sup_ctab_render(t, w, "sbx_sandboxes");
	sup_ctab_free(t);
}

static void render_pools(const sup_core_figs *f, sup_prom *w)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} gauges[] = {
		{ "sbx_pool_size", "Ready sandboxes a pool keeps at least (its size).",
		  offsetof(sup_pool_stats, size) },
		{ "sbx_pool_target", "Ready sandboxes a pool keeps now (its size, or what demand asks).",
		  offsetof(sup_pool_stats, target) },
		{ "sbx_pool_ready", "Ready sandboxes in a pool now.", offsetof(sup_pool_stats, ready) },
		{ "sbx_pool_creating", "Sandboxes of a pool being made or connected.",
		  offsetof(sup_pool_stats, creating) },
		{ "sbx_pool_waiting", "Creates waiting for a pool's sandbox.",
		  offsetof(sup_pool_stats, waiting) },
	};
	size_t n = sup_pools_count(f->pools);
	for (size_t g = 0; g < sizeof(gauges) / sizeof(gauges[0]); g++) {
		family(w, gauges[g].name, "gauge", gauges[g].help);
		for (size_t i = 0; i < n; i++) {
			sup_pool_stats s;
			sup_pools_stats(f->pools, i, &s);
			const char *l[] = { "image", s.image, "isolation",
					    sup_isolation_names[s.isolation], NULL };
			sup_prom_sample(w, gauges[g].name, l,
					*(const unsigned *)((const char *)&s + gauges[g].off));
		}
	}
	for (int k = 0; k < 2; k++) {
		const char *name = k ? "sbx_cold_create_seconds" : "sbx_acquire_seconds";
		family(w, name, "histogram",
		       k ? "A sandbox made from scratch: its create queued until its agent was ready."
			 : "A create's wait for its sandbox: a warm one's limits written, or a cold create.");
		for (size_t i = 0; i < n; i++) {
			sup_pool_stats s;
			sup_pools_stats(f->pools, i, &s);
			const char *l[] = { "image", s.image, "isolation",
					    sup_isolation_names[s.isolation], NULL };
			sup_prom_hist(w, name, l, k ? s.cold_create : s.acquire);
		}
	}
	/* reuse after reset (--pool-reuse); each family's samples together */
	static const char *const reuse[][2] = {
		{ "sbx_pool_reset_seconds", "A released sandbox reset and checked until it was ready in its pool again." },
		{ "sbx_pool_reused_total", "Released sandboxes reset and pooled again." },
		{ "sbx_pool_reset_failed_total", "Resets or host checks that failed: the sandbox was destroyed and replaced." },
	};
	for (int k = 0; k < 3; k++) {
		family(w, reuse[k][0], k ? "counter" : "histogram", reuse[k][1]);
		for (size_t i = 0; i < n; i++) {
			sup_pool_stats s;
			sup_pools_stats(f->pools, i, &s);
			const char *l[] = { "image", s.image, "isolation", sup_isolation_names[s.isolation], NULL };
			if (k == 0)
				sup_prom_hist(w, reuse[k][0], l, s.reset);
			else
				sup_prom_sample(w, reuse[k][0], l, (double)(k == 1 ? s.reused : s.reset_failed));
		}
	}
}

static void render_execs(const sup_core_figs *f, sup_prom *w)
{
	family(w, "sbx_execs_total", "counter",
	       "Commands run through exec that ended: exited, signaled, timed_out, failed (no result).");
	for (size_t i = 0; i < SUP_CORE_EXEC_RESULTS; i++) {
		const char *l[] = { "result", sup_core_exec_results[i], NULL };
		sup_prom_sample(w, "sbx_execs_total", l, (double)f->execs[i]);
	}
	family(w, "sbx_exec_duration_seconds", "histogram",
	       "Exec run time as the supervisor saw it, of commands that have a result.");
	sup_prom_hist(w, "sbx_exec_duration_seconds", NULL, f->exec_seconds);
	family(w, "sbx_exec_oom_kills_total", "counter",
	       "Commands the kernel killed for their sandbox's memory limit.");
	sup_prom_sample(w, "sbx_exec_oom_kills_total", NULL, (double)f->oom_killed);

	sup_agent_totals at;
	sup_agent_totals_get(&at);
	family(w, "sbx_agent_bytes_total", "counter",
	       "Data bytes streamed between the supervisor and the sandboxes' agents.");
	const char *from[] = { "direction", "from_agent", NULL }, *to[] = { "direction", "to_agent", NULL };
	sup_prom_sample(w, "sbx_agent_bytes_total", from, (double)at.bytes_from);
	sup_prom_sample(w, "sbx_agent_bytes_total", to, (double)at.bytes_to);
	family(w, "sbx_agent_timeouts_total", "counter", "Agent calls past their deadline (504).");
	sup_prom_sample(w, "sbx_agent_timeouts_total", NULL, (double)at.timeouts);
	family(w, "sbx_agent_faults_total", "counter",
	       "Agent connections dropped for what the agent did (protocol, ping, blame).");
	sup_prom_sample(w, "sbx_agent_faults_total", NULL, (double)at.faults);

	family(w, "sbx_quota_refusals_total", "counter",
	       "Creates refused (429) for a tenant's quota, by the figure that was over.");
	sup_ctab_render(f->refusals, w, "sbx_quota_refusals_total");
}

/* The per-tenant series, in the order they are rendered. */
enum { T_SANDBOXES, T_CPUS, T_MEM_LIMIT, T_DISK_LIMIT, T_MEM, T_CPU_S, T_PIDS, T_DISK, T_OOM,
       T_Q_SANDBOXES, T_Q_CPUS, T_Q_MEM, T_Q_DISK, T_N };
static const struct {
	const char *name, *help;
} tenant_series[T_N] = {
	{ "sbx_tenant_sandboxes", "Sandboxes a tenant holds." },
	{ "sbx_tenant_cpus", "CPUs of a tenant's sandboxes' limits, summed." },
	{ "sbx_tenant_memory_limit_bytes", "Memory limits of a tenant's sandboxes, summed." },
	{ "sbx_tenant_disk_limit_bytes", "Disk limits of a tenant's sandboxes, summed." },
	{ "sbx_tenant_memory_bytes", "Memory a tenant's sandboxes use now." },
	{ "sbx_tenant_cpu_seconds", "CPU time of a tenant's running sandboxes since each was made." },
	{ "sbx_tenant_pids", "Processes and threads in a tenant's sandboxes now." },
	{ "sbx_tenant_disk_bytes", "Bytes a tenant's sandboxes hold in their writable layers." },
	{ "sbx_tenant_oom_kills", "OOM kills in a tenant's running sandboxes." },
	{ "sbx_tenant_quota_sandboxes", "A tenant's quota of sandboxes (when it has one)." },
	{ "sbx_tenant_quota_cpus", "A tenant's quota of CPUs (when it has one)." },
	{ "sbx_tenant_quota_memory_bytes", "A tenant's quota of memory (when it has one)." },
	{ "sbx_tenant_quota_disk_bytes", "A tenant's quota of disk (when it has one)." },
};

/* Row r's figure of every series, and whether it has one: a usage figure
 * no sandbox of it could give is left out (unless it has none: 0), a quota
 * it does not have too. */
static void row_values(const tenant_row *r, double v[T_N], bool has[T_N])
{
	const sup_usage *u = &r->use;
	const sup_quota *q = r->t ? &r->t->quota : NULL;
	unsigned qset = q ? q->set : 0;
	v[T_SANDBOXES] = (double)r->sandboxes;
	v[T_CPUS] = (double)r->cpu_milli / 1000;
	v[T_MEM_LIMIT] = (double)r->memory_limit;
	v[T_DISK_LIMIT] = (double)r->disk_limit;
	v[T_MEM] = (double)u->memory;
	v[T_CPU_S] = (double)u->cpu_ns / 1e9;
	v[T_PIDS] = (double)u->pids;
	v[T_DISK] = (double)u->disk;
	v[T_OOM] = (double)u->oom_kills;
	v[T_Q_SANDBOXES] = q ? (double)q->sandboxes : 0;
	v[T_Q_CPUS] = q ? (double)q->cpu_milli / 1000 : 0;
	v[T_Q_MEM] = q ? (double)q->memory : 0;
	v[T_Q_DISK] = q ? (double)q->disk : 0;
	static const unsigned usage_bit[T_N] = { [T_MEM] = SUP_USAGE_MEMORY, [T_CPU_S] = SUP_USAGE_CPU,
						 [T_PIDS] = SUP_USAGE_PIDS, [T_DISK] = SUP_USAGE_DISK,
						 [T_OOM] = SUP_USAGE_OOM_KILLS };
	static const unsigned quota_bit[T_N] = { [T_Q_SANDBOXES] = SUP_QUOTA_SANDBOXES,
						 [T_Q_CPUS] = SUP_QUOTA_CPUS,
						 [T_Q_MEM] = SUP_QUOTA_MEMORY,
						 [T_Q_DISK] = SUP_QUOTA_DISK };
	for (int i = 0; i < T_N; i++)
		has[i] = quota_bit[i] ? (qset & quota_bit[i]) != 0
			 : usage_bit[i] ? (u->known & usage_bit[i]) || !r->sandboxes
					: true;
}

static void render_tenants(const sup_core_figs *f, const sup_tenants *ts, sup_prom *w)
{
	size_t cap = (ts ? sup_tenants_count(ts) : 0) + 1;
	for (const sup_sandbox *sb = f->first; sb; sb = sup_core_next(sb))
		cap++;
	tenant_row *rows = calloc(cap, sizeof(*rows));
	if (!rows) {
		w->failed = true;
		return;
	}
	size_t n = 0;
	for (size_t i = 0; ts && i < sup_tenants_count(ts); i++)
		row_of(rows, &n, sup_tenants_at(ts, i)->name)->t = sup_tenants_at(ts, i);
	for (const sup_sandbox *sb = f->first; sb; sb = sup_core_next(sb)) {
		tenant_row *r = row_of(rows, &n, sb->tenant);
		r->sandboxes++;
		r->cpu_milli += sb->res.cpu_milli;
		r->memory_limit += sb->res.memory;
		r->disk_limit += sb->res.disk;
		sup_usage u;
		sbx_err e;
		if (sb->state == SUP_SB_DESTROYING)
			continue;
		if (sup_pools_usage(f->pools, sb, &u, &e) == 0)
			use_add(&r->use, &u);
		else
			sup_debug("sandbox %s: usage for metrics: %s", sb->id, e.msg);
	}
	double (*v)[T_N] = calloc(n ? n : 1, sizeof(*v));
	bool (*has)[T_N] = calloc(n ? n : 1, sizeof(*has));
	for (size_t i = 0; v && has && i < n; i++)
		row_values(&rows[i], v[i], has[i]);
	for (int k = 0; v && has && k < T_N; k++) {
		family(w, tenant_series[k].name, "gauge", tenant_series[k].help);
		for (size_t i = 0; i < n; i++) {
			const char *l[] = { "tenant", rows[i].name, NULL };
			if (has[i][k])
				sup_prom_sample(w, tenant_series[k].name, l, v[i][k]);
		}
	}
	if (!v || !has)
		w->failed = true;
	free(v);
	free(has);
	free(rows);
}

void sup_core_metrics(sup_core *c, const sup_tenants *ts, sup_prom *w)
{
	sup_core_figs f;
	sup_core_figures(c, &f);
	render_sandboxes(&f, w);
	render_pools(&f, w);
	render_execs(&f, w);
	render_tenants(&f, ts, w);
}
