"""`bpe serve` (bpe/inspect/serve.py and the page in bpe/inspect/web/): the HTTP routes, and
the page in a real headless browser (Chromium through selenium)."""

from __future__ import annotations

import http.client
import json
import shutil
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager

import pytest

from bpe import Tokenizer
from bpe.inspect.serve import MAX_SHOWN, make_server
from bpe.inspect.show import pieces

TEXT = "Hello <script>alert(1)</script> aaa\nwhere <b>bold</b> & é"


def _aa() -> Tokenizer:
    return Tokenizer([(97, 97)], "gpt2", {})


def _small() -> Tokenizer:
    return Tokenizer.train("Hello there, hello world, where is the script? " * 50, 270, progress=False)


@contextmanager
def serving(tokenizers, **kwargs):
    server = make_server(tokenizers, port=0, **kwargs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def _post(url: str, body: bytes, content_type="application/json"):
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_routes():
    toks = {"aa": _aa(), "small": _small()}
    with serving(toks, max_body=1000) as url:
        with urllib.request.urlopen(url + "/", timeout=20) as r:
            page = r.read().decode()
            assert "<textarea" in page and r.headers["Content-Security-Policy"].startswith("default-src 'self'")
            assert r.headers["X-Content-Type-Options"] == "nosniff"
        with urllib.request.urlopen(url + "/api/tokenizers", timeout=20) as r:
            assert json.loads(r.read()) == [{"name": "aa", "vocab_size": 257},
                                            {"name": "small", "vocab_size": len(toks["small"].vocab)}]
        status, body = _post(url + "/api/tokenize", json.dumps({"text": TEXT}).encode())
        assert status == 200
        for result, (name, tok) in zip(body["results"], toks.items()):
            ids = tok.encode(TEXT)
            assert result["name"] == name and result["count"] == len(ids) and not result["truncated"]
            assert [t[0] for t in result["tokens"]] == ids
            assert [t[1] for t in result["tokens"]] == pieces(tok, ids)
            assert sum(t[2] for t in result["tokens"]) == 1  # one newline
        # Too large: 413 before the body is read.
        status, body = _post(url + "/api/tokenize", json.dumps({"text": "a" * 2000}).encode())
        assert status == 413 and "at most 1,000" in body["error"]
        assert _post(url + "/api/tokenize", b"not json")[0] == 400
        assert _post(url + "/api/tokenize", b'{"text": 3}')[0] == 400
        assert _post(url + "/api/nothing", b"{}")[0] == 404
        # No Content-Length: 411.
        host, port = url.rsplit(":", 1)
        conn = http.client.HTTPConnection("127.0.0.1", int(port), timeout=20)
        conn.putrequest("POST", "/api/tokenize")
        conn.endheaders()
        assert conn.getresponse().status == 411
        conn.close()
        # An upload: the compare rows, per section.
        status, body = _post(url + "/api/compare?name=u.txt", b"===== X [one] =====\naaa\n===== X [two] =====\nbb\n",
                             "application/octet-stream")
        assert status == 200
        assert [(r["tokenizer"], r["section"]) for r in body["rows"]] == [
            ("aa", "one"), ("small", "one"), ("aa", "two"), ("small", "two")]
        assert body["rows"][0]["tokens"] == 3  # "aaa\n": [aa][a][\n]
        status, body = _post(url + "/api/compare?name=bad.txt", b"\xff", "application/octet-stream")
        assert status == 400 and "not valid UTF-8" in body["error"]


def test_long_text_is_cut_for_display_not_counted_short():
    with serving({"aa": _aa()}) as url:
        status, body = _post(url + "/api/tokenize", json.dumps({"text": "ab" * (MAX_SHOWN + 10)}).encode())
        [r] = body["results"]
        assert r["count"] == 2 * (MAX_SHOWN + 10) and len(r["tokens"]) == MAX_SHOWN and r["truncated"]


# -- in a browser ------------------------------------------------------------------------


def _chromium():
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("needs Chromium and its driver: apt-get install -y chromium chromium-driver")
    from selenium import webdriver  # the test extra
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1200,900"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def test_page_in_a_browser(tmp_path):
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    toks = {"aa": _aa(), "small": _small()}
    driver = _chromium()
    try:
        with serving(toks, max_body=4096) as url:
            driver.get(url + "/")
            wait = WebDriverWait(driver, 30)
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".panel")) == 2)
            box = driver.find_element(By.ID, "text")
            box.send_keys(TEXT)
            want = {name: tok.encode(TEXT) for name, tok in toks.items()}

            def counts(d):
                return {name: d.execute_script(
                    "const c = document.querySelector(`.panel[data-name='${arguments[0]}'] .count`);"
                    "return c && c.dataset.count;", name) for name in toks}

            wait.until(lambda d: counts(d) == {n: str(len(ids)) for n, ids in want.items()})
            for name, tok in toks.items():
                spans = driver.find_elements(By.CSS_SELECTOR, f".panel[data-name='{name}'] .tok")
                assert [s.get_property("textContent") for s in spans] == pieces(tok, want[name])
                assert [s.get_attribute("data-id") for s in spans] == [str(i) for i in want[name]]
                # Alternating colours: neighbours never share a class.
                classes = [s.get_attribute("class") for s in spans]
                assert all(a != b for a, b in zip(classes, classes[1:]))
                count = driver.find_element(By.CSS_SELECTOR, f".panel[data-name='{name}'] .count").text
                assert count.startswith(f"{len(want[name])} tokens")
            # "<script>" and "<b>" were shown as text, never run or parsed.
            assert driver.execute_script("return document.querySelectorAll('script').length") == 1
            assert driver.execute_script("return document.querySelectorAll('#results b').length") == 0
            with pytest.raises(NoAlertPresentException):
                driver.switch_to.alert.text  # noqa: B018
            # Upload a file: the compare table.
            upload = tmp_path / "sample.txt"
            upload.write_text("===== S [one] =====\naaa bb\n===== S [two] =====\nwhere is it\n", encoding="utf-8")
            driver.find_element(By.ID, "file").send_keys(str(upload))
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#compare tr")) == 5)
            rows = [[c.text for c in tr.find_elements(By.TAG_NAME, "td")]
                    for tr in driver.find_elements(By.CSS_SELECTOR, "#compare tr")[1:]]
            assert [(r[0], r[1]) for r in rows] == [("aa", "sample.txt [one]"), ("small", "sample.txt [one]"),
                                                    ("aa", "sample.txt [two]"), ("small", "sample.txt [two]")]
            assert rows[0][2] == str(len(_aa().encode("aaa bb\n")))
            # Over the size limit: the page says 413.
            big = tmp_path / "big.txt"
            big.write_text("a" * 5000, encoding="utf-8")
            driver.find_element(By.ID, "file").send_keys(str(big))
            wait.until(lambda d: "413" in d.find_element(By.ID, "compare-status").text)
    finally:
        driver.quit()
