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
		{ "sbx_pool_size", "Ready sandboxes a pool keeps.", offsetof(sup_pool_stats, size) },
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

/* One gauge per tenant: value(row) for every row that has it. */
static void tenant_gauge(sup_prom *w, const tenant_row *rows, size_t n, const char *name,
			 const char *help, double (*value)(const tenant_row *r, bool *has))
{
	family(w, name, "gauge", help);
	for (size_t i = 0; i < n; i++) {
		bool has = true;
		double v = value(&rows[i], &has);
		const char *l[] = { "tenant", rows[i].name, NULL };
		if (has)
			sup_prom_sample(w, name, l, v);
	}
}

static double v_sandboxes(const tenant_row *r, bool *has) { (void)has; return (double)r->sandboxes; }
static double v_cpus(const tenant_row *r, bool *has) { (void)has; return (double)r->cpu_milli / 1000; }
static double v_mem_limit(const tenant_row *r, bool *has) { (void)has; return (double)r->memory_limit; }
static double v_disk_limit(const tenant_row *r, bool *has) { (void)has; return (double)r->disk_limit; }
static double v_mem(const tenant_row *r, bool *has) { *has = r->use.known & SUP_USAGE_MEMORY || !r->sandboxes; return (double)r->use.memory; }
static double v_cpu_s(const tenant_row *r, bool *has) { *has = r->use.known & SUP_USAGE_CPU || !r->sandboxes; return (double)r->use.cpu_ns / 1e9; }
static double v_pids(const tenant_row *r, bool *has) { *has = r->use.known & SUP_USAGE_PIDS || !r->sandboxes; return (double)r->use.pids; }
static double v_disk(const tenant_row *r, bool *has) { *has = r->use.known & SUP_USAGE_DISK || !r->sandboxes; return (double)r->use.disk; }
static double v_oom(const tenant_row *r, bool *has) { *has = r->use.known & SUP_USAGE_OOM_KILLS || !r->sandboxes; return (double)r->use.oom_kills; }

static double quota_of(const tenant_row *r, bool *has, unsigned bit, uint64_t v, double scale)
{
	*has = r->t && (r->t->quota.set & bit);
	return (double)v / scale;
}
static double q_sandboxes(const tenant_row *r, bool *has) { return quota_of(r, has, SUP_QUOTA_SANDBOXES, r->t ? r->t->quota.sandboxes : 0, 1); }
static double q_cpus(const tenant_row *r, bool *has) { return quota_of(r, has, SUP_QUOTA_CPUS, r->t ? r->t->quota.cpu_milli : 0, 1000); }
static double q_memory(const tenant_row *r, bool *has) { return quota_of(r, has, SUP_QUOTA_MEMORY, r->t ? r->t->quota.memory : 0, 1); }
static double q_disk(const tenant_row *r, bool *has) { return quota_of(r, has, SUP_QUOTA_DISK, r->t ? r->t->quota.disk : 0, 1); }

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
	static const struct {
		const char *name, *help;
		double (*value)(const tenant_row *r, bool *has);
	} g[] = {
		{ "sbx_tenant_sandboxes", "Sandboxes a tenant holds.", v_sandboxes },
		{ "sbx_tenant_cpus", "CPUs of a tenant's sandboxes' limits, summed.", v_cpus },
		{ "sbx_tenant_memory_limit_bytes", "Memory limits of a tenant's sandboxes, summed.", v_mem_limit },
		{ "sbx_tenant_disk_limit_bytes", "Disk limits of a tenant's sandboxes, summed.", v_disk_limit },
		{ "sbx_tenant_memory_bytes", "Memory a tenant's sandboxes use now.", v_mem },
		{ "sbx_tenant_cpu_seconds", "CPU time of a tenant's running sandboxes since each was made.", v_cpu_s },
		{ "sbx_tenant_pids", "Processes and threads in a tenant's sandboxes now.", v_pids },
		{ "sbx_tenant_disk_bytes", "Bytes a tenant's sandboxes hold in their writable layers.", v_disk },
		{ "sbx_tenant_oom_kills", "OOM kills in a tenant's running sandboxes.", v_oom },
		{ "sbx_tenant_quota_sandboxes", "A tenant's quota of sandboxes (when it has one).", q_sandboxes },
		{ "sbx_tenant_quota_cpus", "A tenant's quota of CPUs (when it has one).", q_cpus },
		{ "sbx_tenant_quota_memory_bytes", "A tenant's quota of memory (when it has one).", q_memory },
		{ "sbx_tenant_quota_disk_bytes", "A tenant's quota of disk (when it has one).", q_disk },
	};
	for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++)
		tenant_gauge(w, rows, n, g[i].name, g[i].help, g[i].value);
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
