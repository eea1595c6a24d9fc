/* What one sandbox may use (CPU, memory, processes, disk) and what it uses:
 * the figures, their parsing from the supervisor's flags
 * ("cpus=1,memory=1G,pids=1024,disk=10G") and from a create request's
 * "resources" object, the checks against the floor and the ceiling, and their
 * JSON rendering. Pure (jansson only): no I/O; the cgroup and disk modules
 * apply and read the figures. Plain structs of fixed-size numbers, so tenant
 * quotas can add them up and metrics can read them. */
#ifndef SUP_RESOURCES_H
#define SUP_RESOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

struct json_t;

/* Limits of one sandbox. Every field is set: there is no "unlimited". */
typedef struct sup_resources {
	uint32_t cpu_milli; /* CPU time per second of wall time, in thousandths of a CPU */
	uint64_t memory;    /* bytes of memory, page cache included; swap held to the same figure */
	uint32_t pids;      /* processes and threads at once */
	uint64_t disk;      /* bytes its writable layer (overlay upper: /tmp, /workspace, ...) holds */
} sup_resources;

/* The floor every sandbox keeps (its agent needs some of each) and the most
 * a flag may name. 0.01 CPU is the kernel's smallest quota (1 ms per 100 ms). */
#define SUP_RES_MIN_CPU_MILLI 10u
#define SUP_RES_MIN_MEMORY (32ull << 20)
#define SUP_RES_MIN_PIDS 16u
#define SUP_RES_MIN_DISK (32ull << 20)
#define SUP_RES_MAX_CPU_MILLI (4096u * 1000u)
#define SUP_RES_MAX_PIDS (1u << 22)
#define SUP_RES_MAX_BYTES (1ull << 50)

/* Built-in --default-resources: cpus=1,memory=1G,pids=1024,disk=10G. */
void sup_resources_default(sup_resources *r);

/* Apply "key=value[,key=value...]" (keys cpus, memory, pids, disk; sizes
 * as --max-body takes them: 512M, 10G) over *r: named keys replace r's
 * figures, the others stay. flag names the option in errors. Each figure
 * must be within the floor and the SUP_RES_MAX_* bounds. */
int sup_resources_parse_spec(const char *flag, const char *spec, sup_resources *r, sbx_err *err);

/* Every figure of r at most max's; -EINVAL naming the first that is over. */
int sup_resources_check_max(const char *what, const sup_resources *r, const sup_resources *max,
			    sbx_err *err);

/* The figures of a sup_resources, as bits (which ones a request named). */
enum {
	SUP_RES_CPUS = 1u << 0,
	SUP_RES_MEMORY = 1u << 1,
	SUP_RES_PIDS = 1u << 2,
	SUP_RES_DISK = 1u << 3,
};

/* A create request's "resources" (a JSON object; each key optional: "cpus"
 * a number, "memory" and "disk" a size string or a byte count, "pids" an
 * integer). Missing keys take def's figures; a figure under the floor or
 * over max is -EINVAL naming the field ("resources.memory"). *given (may be
 * NULL) gets the SUP_RES_* bits of the keys present. */
int sup_resources_from_json(const struct json_t *v, const sup_resources *def,
			    const sup_resources *max, sup_resources *out, unsigned *given,
			    sbx_err *err);
/* dst's figures of the SUP_RES_* bits in which, from src. */
void sup_resources_take(sup_resources *dst, const sup_resources *src, unsigned which);

/* One figure named key ("cpus", "memory", "pids", "disk") from a JSON value
 * as a create's resources take it, without a sandbox's floor or ceiling: a
 * total of several sandboxes (a tenant's quota). cpus in thousandths. name
 * is how messages call the value ("tenants.a.quota.cpus"). */
int sup_resources_total_from_json(const char *key, const struct json_t *v, const char *name,
				  uint64_t *out, sbx_err *err);

/* {"cpus": 0.5, "memory": <bytes>, "pids": 256, "disk": <bytes>} */
struct json_t *sup_resources_to_json(const sup_resources *r);

/* "0.5", "1", "2.25": a cpu figure as the flags take it. */
void sup_resources_format_cpus(uint32_t milli, char *buf, size_t size);
/* "512M", "10G", "1536K", or bytes: a size as the flags take it. */
void sup_resources_format_size(uint64_t bytes, char *buf, size_t size);

/* What a sandbox uses, read at request time from its cgroup and its disk.
 * A figure the host could not give is absent from `known`. */
enum {
	SUP_USAGE_MEMORY = 1u << 0,
	SUP_USAGE_MEMORY_PEAK = 1u << 1,
	SUP_USAGE_CPU = 1u << 2,
	SUP_USAGE_PIDS = 1u << 3,
	SUP_USAGE_DISK = 1u << 4,
	SUP_USAGE_OOM_KILLS = 1u << 5,
};

typedef struct sup_usage {
	uint64_t memory;      /* bytes charged now, page cache included */
	uint64_t memory_peak; /* the most charged at once since the sandbox was made */
	uint64_t cpu_ns;      /* CPU time of all its processes since it was made */
	uint64_t pids;        /* processes and threads now */
	uint64_t disk;        /* bytes its writable layer holds */
	uint64_t oom_kills;   /* processes the kernel killed for its memory limit */
	unsigned known;       /* SUP_USAGE_* bits */
} sup_usage;

/* {"memory_bytes", "memory_peak_bytes", "cpu_seconds", "pids", "disk_bytes",
 * "oom_kills"}: null for what is not known. */
struct json_t *sup_usage_to_json(const sup_usage *u);

#endif
