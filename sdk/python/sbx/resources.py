"""What outlives a sandbox, each a small class over its routes: Snapshot
(a sandbox's writable layer, /v1/snapshots), Volume (a tenant's named
folder, /v1/volumes), Secret (a tenant's write-only value, /v1/secrets),
Image (the node's image store, /v1/images) and the node's pools
(/v1/pools). A sandbox makes a Snapshot (Sandbox.snapshot)
and is made from one (Sandbox.create(snapshot=...)); that wiring is
sandbox.py's. Maps calls onto routes; keeps no state beyond the last
answer."""
import os
import urllib.parse

from ._http import Client


def _seg(name):
    """One path segment, percent-encoded once (an image ref's '/' as %2F)."""
    return urllib.parse.quote(name, safe=":@+")


class _Resource:
    """An object of a collection route: `info` the last answer (a dict),
    `client` the Client it came through."""

    collection = ""  # "/v1/snapshots", ...
    key = "id"       # the field that names one in its route

    def __init__(self, info, client):
        self.info = info
        self.client = client

    @property
    def path(self):
        return "%s/%s" % (self.collection, _seg(self.info[self.key]))

    def __getitem__(self, k):
        return self.info[k]

    def __eq__(self, other):
        return type(other) is type(self) and other.info[self.key] == self.info[self.key]

    def __hash__(self):
        return hash(self.info[self.key])

    def __repr__(self):
        return "%s(%r)" % (type(self).__name__, self.info[self.key])

    @classmethod
    def _client(cls, url, token, client):
        return client or Client(url, token)

    @classmethod
    def get(cls, name, url=None, token=None, client=None):
        """One by its name or id (NotFound if unknown or another tenant's)."""
        c = cls._client(url, token, client)
        return cls(c.call("GET", "%s/%s" % (cls.collection, _seg(name))), c)

    @classmethod
    def list(cls, url=None, token=None, client=None):
        c = cls._client(url, token, client)
        field = cls.collection.rsplit("/", 1)[1]
        return [cls(i, c) for i in c.call("GET", cls.collection)[field]]

    def refresh(self):
        self.info = self.client.call("GET", self.path)
        return self.info


class Snapshot(_Resource):
    """A snapshot of a sandbox's files (`id` "sn-...", `name`, `sandbox`,
    `image`, `size`, `created_at`). Restore it with
    `Sandbox.create(snapshot=snap)`."""

    collection = "/v1/snapshots"

    @property
    def id(self):
        return self.info["id"]

    @property
    def name(self):
        return self.info.get("name")

    def delete(self):
        """204; a restore that already opened the archive reads on."""
        self.client.call("DELETE", self.path, ok=(204,))


class Volume(_Resource):
    """A tenant's named folder that outlives sandboxes (`name`, `size`,
    `mounted`, `used` once refreshed). Mount it with
    `Sandbox.create(volumes=[{"name": ..., "mount": ..., "read_only": ...}])`."""

    collection = "/v1/volumes"
    key = "name"

    @property
    def name(self):
        return self.info["name"]

    @classmethod
    def create(cls, name, size, url=None, token=None, client=None):
        """POST /v1/volumes: `size` "2G" or a byte count (Exists if the
        tenant has one of that name)."""
        c = cls._client(url, token, client)
        return cls(c.call("POST", cls.collection, json_body={"name": name, "size": size},
                          ok=(201,), timeout=120), c)

    def delete(self):
        """Removes it and its files (VolumeBusy while a sandbox mounts it)."""
        self.client.call("DELETE", self.path, ok=(204,), timeout=120)


class Secret(_Resource):
    """A tenant's named value (an API key, a token): write-only, so `info`
    holds `name`, `size`, `created_at` and `updated_at`, never the value.
    Give it to a sandbox with `Sandbox.create(secrets={"VAR": name})`."""

    collection = "/v1/secrets"
    key = "name"

    @property
    def name(self):
        return self.info["name"]

    @classmethod
    def put(cls, name, value, url=None, token=None, client=None):
        """PUT /v1/secrets/{name}: set or replace it (`value` a str)."""
        c = cls._client(url, token, client)
        return cls(c.call("PUT", "%s/%s" % (cls.collection, _seg(name)),
                          json_body={"value": value}, ok=(200, 201)), c)

    @classmethod
    def get(cls, name, url=None, token=None, client=None):
        """One of the list by name (NotFound if the tenant has none)."""
        for s in cls.list(url, token, client):
            if s.name == name:
                return s
        from .errors import NotFound
        raise NotFound(404, "not_found", "secret %s: not found" % name)

    def refresh(self):
        self.info = type(self).get(self.name, client=self.client).info
        return self.info

    def delete(self):
        """204; sandboxes running keep what they were given."""
        self.client.call("DELETE", self.path, ok=(204,))


class Image(_Resource):
    """An image of the node's store (`digest`, `refs`, `layers`, `size`,
    `in_use`). Importing, pulling and deleting are the admin tenant's."""

    collection = "/v1/images"
    key = "digest"

    @property
    def digest(self):
        return self.info["digest"]

    @property
    def refs(self):
        return self.info.get("refs", [])

    @classmethod
    def import_archive(cls, data, name=None, progress=None, url=None, token=None, client=None,
                       timeout=600):
        """POST an OCI layout or `docker save` tarball (maybe gzip'd or
        zstd'd): `data` a local path or a binary file object, streamed in
        pieces, never read whole. `name` names an archive of one image.
        Returns the Images it held."""
        c = cls._client(url, token, client)
        if isinstance(data, (str, os.PathLike)):
            with open(data, "rb") as f:
                return cls.import_archive(f, name, progress, client=c, timeout=timeout)
        from .sandbox import _chunked, _pieces_of_file, _remaining
        total = _remaining(data)
        headers = {"Content-Type": "application/x-tar"}
        if total is None:
            headers["Transfer-Encoding"] = "chunked"
            body = _chunked(_pieces_of_file(data, None, progress))
        else:
            headers["Content-Length"] = str(total)
            body = _pieces_of_file(data, total, progress)
        res = c.call("POST", cls.collection, {"name": name}, body=body, headers=headers,
                     ok=(201,), timeout=timeout)
        return [cls(i, c) for i in res["images"]]

    @classmethod
    def pull(cls, ref, name=None, url=None, token=None, client=None, timeout=900):
        """Pull `ref` with the node's skopeo (a registry reference, or an
        `oci:`/`oci-archive:` path below the node's --image-pull-dir)."""
        c = cls._client(url, token, client)
        body = {"ref": ref}
        if name is not None:
            body["name"] = name
        res = c.call("POST", cls.collection, json_body=body, ok=(201,), timeout=timeout)
        return [cls(i, c) for i in res["images"]]

    @classmethod
    def store(cls, url=None, token=None, client=None):
        """The store's totals: {"images", "layers", "bytes"}."""
        return cls._client(url, token, client).call("GET", cls.collection)["store"]

    @classmethod
    def remove(cls, ref, url=None, token=None, client=None):
        """DELETE a ref (the image stays while it has others) or a digest;
        returns the answer ({"deleted", "digest", "gc", "store"}). Conflict
        while a sandbox or a pool holds it."""
        c = cls._client(url, token, client)
        return c.call("DELETE", "%s/%s" % (cls.collection, _seg(ref)), timeout=120)

    def delete(self):
        return self.remove(self.digest, client=self.client)


def pools(url=None, token=None, client=None):
    """GET /v1/pools: every (image, isolation) pool of the node (dicts)."""
    return (client or Client(url, token)).call("GET", "/v1/pools")["pools"]


def set_pool(image, size, isolation=None, url=None, token=None, client=None):
    """PUT /v1/pools/{image}: keep `size` sandboxes of it ready (the admin's)."""
    body = {"size": size}
    if isolation is not None:
        body["isolation"] = isolation
    return (client or Client(url, token)).call("PUT", "/v1/pools/" + _seg(image), json_body=body)

