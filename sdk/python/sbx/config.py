"""Where the API is, which token to call it with and which CA an https://
API's certificate is checked against: arguments first, then the
environment (`SBX_URL`, `SBX_TOKEN`, `SBX_CA_FILE`), then the config file
(`$SBX_CONFIG`, else `~/.config/sbx/config.json`, honouring
`$XDG_CONFIG_HOME`): `{"url": "https://sbx.example:7070", "token": "...",
"ca_file": "/etc/sbx/ca.crt"}`. Reads only; never writes the file or
prints the token."""
import json
import os

DEFAULT_URL = "http://127.0.0.1:7070"


def config_path():
    p = os.environ.get("SBX_CONFIG")
    if p:
        return p
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "sbx", "config.json")


def _file():
    path = config_path()
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise ValueError("sbx config %s: %s" % (path, e)) from None
    if not isinstance(data, dict):
        raise ValueError("sbx config %s: not a JSON object" % path)
    return data


def resolve(url=None, token=None):
    """(url, token): the first of argument, environment, file; the URL
    defaults to http://127.0.0.1:7070, the token to None (401 then)."""
    url = url or os.environ.get("SBX_URL")
    token = token or os.environ.get("SBX_TOKEN")
    if url is None or token is None:
        f = _file()
        url = url or f.get("url")
        token = token or f.get("token")
    return (url or DEFAULT_URL).rstrip("/"), token


def resolve_ca_file(ca_file=None):
    """The PEM file of the CA(s) an https:// API is verified against (a
    private CA's), or None: the system's CAs."""
    return ca_file or os.environ.get("SBX_CA_FILE") or _file().get("ca_file") or None
