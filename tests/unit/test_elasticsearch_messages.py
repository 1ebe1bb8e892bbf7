"""What the Elasticsearch store's messages may show of its hosts: never the credentials of a host URL."""

from __future__ import annotations

from reme_service.stores.es.store import _scrubbed, _without_userinfo


def test_a_host_url_is_shown_without_its_credentials() -> None:
    assert _without_userinfo("http://elastic:pw@es.internal:9200") == "http://es.internal:9200"
    assert _without_userinfo("https://user@es:9243/prefix") == "https://es:9243/prefix"
    assert _without_userinfo("http://es:9200") == "http://es:9200"


def test_a_transport_error_quoting_a_host_loses_the_credentials() -> None:
    hosts = ["http://elastic:p@ss@es:9200", "http://es2:9200"]
    text = "Connection error caused by: NewConnectionError(http://elastic:p@ss@es:9200/_info, http://es2:9200)"
    assert (
        _scrubbed(text, hosts)
        == "Connection error caused by: NewConnectionError(http://es:9200/_info, http://es2:9200)"
    )
