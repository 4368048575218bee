"""Opens the ReloadGate dashboard in headless Chromium (selenium) and reports what the page shows.

    python dashboard_check.py URL SCREENSHOT_DIR [EXPLAIN_ID]

URL is the address `reloadgate dashboard` printed (with its token). Prints one JSON object: the page's
figures (every element with data-figure), the instance ids of the pending reloads listed, the text the
explain box shows for EXPLAIN_ID, the what-if commands, whether the page fits a phone's width, and what the same gateway answers
to a browser without the token. Saves desktop.png (1280x800), whatif.png (the what-if card) and phone.png (390x844) in SCREENSHOT_DIR.
"""
import json
import os
import sys
import time
from urllib.parse import urlsplit

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800", "--lang=en-US"]:
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")), options=options)


def viewport(driver, width, height, mobile):
    """Sets the page's viewport exactly (the window's size includes no browser frame in this mode)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 2 if mobile else 1, "mobile": mobile,
    })


def loaded_after(driver, previous):
    """Waits until the page has drawn figures newer than `previous` and returns their time."""
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-loaded") not in (None, "", previous))
    return driver.find_element(By.TAG_NAME, "body").get_attribute("data-loaded")


def main():
    url, shots = sys.argv[1], sys.argv[2]
    explain_id = sys.argv[3] if len(sys.argv) > 3 else None
    os.makedirs(shots, exist_ok=True)
    parts = urlsplit(url)
    base = f"{parts.scheme}://{parts.netloc}"
    result = {}
    driver = browser()
    try:
        viewport(driver, 1280, 800, False)
        driver.get(url)  # the page takes the token out of the address (#token=) into its tab's sessionStorage
        stamp = loaded_after(driver, None)
        result["address"] = driver.current_url
        # No ambient credential: nothing a browser would send to another port of 127.0.0.1.
        result["cookies"] = [cookie["name"] for cookie in driver.get_cookies()]
        # Read in one script, so that a refresh of the page (every 5 seconds) cannot replace the tables
        # between two reads (a stale element).
        result.update(driver.execute_script("""
            const text = node => node.innerText.trim();
            const rows = selector => [...document.querySelectorAll(selector)];
            const cells = row => [...row.querySelectorAll("td")].map(text);
            return {
                figures: Object.fromEntries(rows("[data-figure]").map(node => [node.getAttribute("data-figure"), text(node)])),
                pending: rows("#pending-list tbody tr[data-instance]").map(row => parseInt(row.getAttribute("data-instance"), 10)),
                // What the pending list says of each reload's kind, and the budget policies' rows (controls apart).
                pendingKinds: Object.fromEntries(rows("#pending-list tbody tr[data-instance]").map(row => [row.getAttribute("data-instance"), cells(row)[4]])),
                policies: rows("#budget-policies tbody tr").map(cells),
                lowest: rows("#budget-lowest tbody tr").map(cells),
                charts: rows(".chart svg").length,
                freshnessKinds: rows("#freshness-kinds tbody tr[data-kind]").map(row => row.getAttribute("data-kind")),
            };
        """))
        result["status"] = driver.find_element(By.ID, "status").text
        result["whatIf"] = driver.find_element(By.ID, "whatif-commands").text
        if explain_id:
            field = driver.find_element(By.ID, "explain-id")
            field.clear()
            field.send_keys(explain_id)
            driver.find_element(By.CSS_SELECTOR, "#explain-form button").click()
            WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "explain-result").text.strip() != "")
            result["explain"] = driver.find_element(By.ID, "explain-result").text
        driver.save_screenshot(os.path.join(shots, "desktop.png"))
        driver.find_element(By.CSS_SELECTOR, "section[aria-labelledby=whatif-title]").screenshot(os.path.join(shots, "whatif.png"))
        # A phone: the page reflows to one column and scrolls only vertically.
        viewport(driver, 390, 844, True)
        loaded_after(driver, stamp)
        result["phoneOverflow"] = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        driver.save_screenshot(os.path.join(shots, "phone.png"))
        # A navigation to the data (what another page could make the browser do) carries no token: refused.
        driver.get(base + "/v1/stats")
        result["withoutToken"] = driver.find_element(By.TAG_NAME, "body").text
    finally:
        driver.quit()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
