/* The sandbox's own programs keep working in the jail (uid 1000, no
 * capabilities, no_new_privs, the built-in seccomp profile): sh, python3
 * (json, ssl, subprocess), node (fs, child_process), gcc compiling and
 * running a program, git init/commit, and pip install --user of a package
 * built from a local folder without network. Needs root; each test gets a
 * fresh HOME owned by uid 1000, removed afterwards also on failure. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent_jail.h"
#include "test_jail_util.h"

#define PYTHON "/usr/bin/python3" /* Debian's, with python3-pip; not a pyenv shim under /root */

static struct {
	char *home;
	char passwd[300], group[300], profile[300];
	char env_home[320], env_tmp[320];
	jail_result *res;
	agent_jail jail;
} T;

static int group_setup(void **state)
{
	(void)state;
	if (geteuid() != 0) {
		fprintf(stderr, "test_jail_programs needs root\n");
		return -1;
	}
	T.res = malloc(sizeof(*T.res));
	return T.res ? 0 : -1;
}

static int group_teardown(void **state)
{
	(void)state;
	free(T.res);
	agent_seccomp_cache_clear();
	return 0;
}

static int setup(void **state)
{
	agent_jail_spec s = { .user = "sandbox" };
	sbx_err err = { 0 };

	(void)state;
	T.home = jail_tmpdir();
	if (!T.home)
		return -1;
	/* passwd and group beside HOME, root-owned: the host's uid 1000 may
	 * have another name and home. */
	snprintf(T.passwd, sizeof(T.passwd), "%s/.passwd", T.home);
	snprintf(T.group, sizeof(T.group), "%s/.group", T.home);
	snprintf(T.profile, sizeof(T.profile), "%s/.no-profile.json", T.home);
	snprintf(T.env_home, sizeof(T.env_home), "HOME=%s", T.home);
	snprintf(T.env_tmp, sizeof(T.env_tmp), "TMPDIR=%s", T.home);
	if (jail_write_file(T.passwd, "sandbox:x:1000:1000::/home/sandbox:/bin/sh\n", false) < 0 ||
	    jail_write_file(T.group, "sandbox:x:1000:\n", false) < 0)
		return -1;
	s.passwd_path = T.passwd;
	s.group_path = T.group;
	s.seccomp_profile = T.profile; /* absent: the built-in profile */
	if (agent_jail_prepare(&s, &T.jail, &err) < 0) {
		fprintf(stderr, "agent_jail_prepare: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	agent_jail_release(&T.jail);
	jail_rm_rf(T.home);
	free(T.home);
	T.home = NULL;
	return 0;
}

static void need(const char *program, const char *package)
{
	if (access(program, X_OK) != 0)
		fail_msg("%s is missing: scripts/install-deps must install %s", program, package);
}

/* sh -c script in the jail, in HOME; must exit 0 and print want exactly. */
static void run_sh(const char *script, const char *want, int timeout_ms)
{
	char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };
	char *envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", T.env_home, T.env_tmp, "USER=sandbox",
			 "LANG=C.UTF-8", NULL };

	assert_int_equal(jail_run(&T.jail, T.home, argv, envp, timeout_ms, T.res), 0);
	if (T.res->timed_out || !WIFEXITED(T.res->status) || WEXITSTATUS(T.res->status) != 0)
		fail_msg("%s: %s status 0x%x, output:\n%s", script, T.res->timed_out ? "timed out," : "",
			 T.res->status, T.res->out);
	if (strcmp(T.res->out, want) != 0)
		fail_msg("%s: output\n%s\nwant\n%s", script, T.res->out, want);
}

static void test_sh(void **state)
{
	(void)state;
	run_sh("echo ok; id -u; id -g; cat /proc/self/status | grep -E '^(CapEff|NoNewPrivs|Seccomp):' | "
	       "tr -d '\\t'",
	       "ok\n1000\n1000\nCapEff:0000000000000000\nNoNewPrivs:1\nSeccomp:2\n", 20000);
}

static void test_python3(void **state)
{
	(void)state;
	need(PYTHON, "python3");
	run_sh(PYTHON " -c 'import json,ssl,subprocess; print(subprocess.run([\"true\"]).returncode)'", "0\n",
	       30000);
	/* threads, a process pool (fork, pipes, semaphores), hashlib, sqlite */
	run_sh(PYTHON " -c '"
		      "import concurrent.futures as cf, hashlib, sqlite3, multiprocessing as mp\n"
		      "with cf.ThreadPoolExecutor(4) as ex: print(sum(ex.map(abs, [-1, -2, 3])))\n"
		      "with mp.Pool(2) as p: print(sum(p.map(abs, [-4, 5])))\n"
		      "print(hashlib.sha256(b\"x\").hexdigest()[:8])\n"
		      "print(sqlite3.connect(\":memory:\").execute(\"select 6*7\").fetchone()[0])'",
	       "6\n9\n2d711642\n42\n", 60000);
}

static void test_node(void **state)
{
	(void)state;
	need("/usr/bin/node", "nodejs");
	run_sh("node -e 'console.log(1+1)'", "2\n", 30000);
	/* libuv's thread pool (io_uring is refused: it must fall back), a
	 * child process, a timer */
	run_sh("node -e '"
	       "const fs = require(\"fs\"), cp = require(\"child_process\");"
	       "fs.writeFileSync(\"n.txt\", \"hi\");"
	       "fs.readFile(\"n.txt\", \"utf8\", (e, d) => {"
	       " console.log(e ? e.code : d);"
	       " console.log(cp.execFileSync(\"/bin/echo\", [\"child\"]).toString().trim());"
	       " setTimeout(() => console.log(\"timer\"), 10); });'",
	       "hi\nchild\ntimer\n", 30000);
}

static void test_gcc(void **state)
{
	char path[400];

	(void)state;
	need("/usr/bin/gcc", "gcc (build-essential)");
	snprintf(path, sizeof(path), "%s/hello.c", T.home);
	assert_int_equal(jail_write_file(path,
					 "#include <stdio.h>\n"
					 "int main(void) { printf(\"hello %d\\n\", 6 * 7); return 0; }\n",
					 true),
			 0);
	run_sh("gcc -O2 -Wall -o hello hello.c && ./hello", "hello 42\n", 60000);
}

static void test_git(void **state)
{
	(void)state;
	need("/usr/bin/git", "git");
	run_sh("set -e; git init -q repo; cd repo; git config user.email sbx@example.invalid; "
	       "git config user.name sbx; echo a > a.txt; git add a.txt; git commit -q -m first; "
	       "echo b >> a.txt; git commit -q -am second; git log --format=%s | tr '\\n' ' '; echo",
	       "second first \n", 60000);
}

static void test_pip_install_user(void **state)
{
	char path[400];

	(void)state;
	need(PYTHON, "python3");
	run_sh(PYTHON " -m pip --version >/dev/null 2>&1 || echo missing", "", 30000);
	snprintf(path, sizeof(path), "%s/pkg", T.home);
	assert_int_equal(mkdir(path, 0755), 0);
	assert_int_equal(chown(path, JAIL_TEST_UID, JAIL_TEST_GID), 0);
	snprintf(path, sizeof(path), "%s/pkg/pyproject.toml", T.home);
	assert_int_equal(jail_write_file(path,
					 "[build-system]\n"
					 "requires = [\"setuptools\"]\n"
					 "build-backend = \"setuptools.build_meta\"\n"
					 "[project]\n"
					 "name = \"sbxjailpkg\"\n"
					 "version = \"0.1\"\n",
					 true),
			 0);
	snprintf(path, sizeof(path), "%s/pkg/sbxjailpkg.py", T.home);
	assert_int_equal(jail_write_file(path, "VALUE = 'installed'\n", true), 0);
	/* No network and no build isolation: setuptools comes from Debian's
	 * python3-setuptools. Debian marks its python externally managed
	 * (PEP 668), so --user needs --break-system-packages. */
	run_sh(PYTHON " -m pip install -q --user --no-index --no-build-isolation --break-system-packages "
		      "--disable-pip-version-check ./pkg >pip.log 2>&1 || { cat pip.log; exit 1; }; "
		      "cd / && " PYTHON " -c 'import sbxjailpkg, site; "
		      "print(sbxjailpkg.VALUE, sbxjailpkg.__file__.startswith(site.USER_SITE))'",
	       "installed True\n", 180000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sh, setup, teardown),
		cmocka_unit_test_setup_teardown(test_python3, setup, teardown),
		cmocka_unit_test_setup_teardown(test_node, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gcc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_git, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pip_install_user, setup, teardown),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
