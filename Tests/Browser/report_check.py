"""Opens a `reloadgate simulate` HTML report in headless Chromium (selenium) and reports what it shows.

    python report_check.py REPORT.html SCREENSHOT.png [WIDTH HEIGHT]

Prints one JSON object: every figure of the tables (elements with data-figure), and per chart
(svg[data-chart]) its drawn size, its series (polylines and bars by data-series) and how many points
or bars each has; whether the page loaded anything from elsewhere (it must not). Saves a screenshot of the
whole page at WIDTH (default 1280) to SCREENSHOT.png.
"""
import json
import os
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def browser(width, height):
    options = webdriver.ChromeOptions()
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}", "--lang=en-US"]:
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")), options=options)


def main():
    report, screenshot = os.path.abspath(sys.argv[1]), sys.argv[2]
    width = int(sys.argv[3]) if len(sys.argv) > 3 else 1280
    height = int(sys.argv[4]) if len(sys.argv) > 4 else 900
    driver = browser(width, height)
    try:
        driver.get("file://" + report)
        result = {"title": driver.title}
        result["figures"] = {e.get_attribute("data-figure"): e.text for e in driver.find_elements(By.CSS_SELECTOR, "[data-figure]")}
        charts = {}
        for svg in driver.find_elements(By.CSS_SELECTOR, "svg[data-chart]"):
            series = {}
            for line in svg.find_elements(By.CSS_SELECTOR, "polyline[data-series]"):
                series[line.get_attribute("data-series")] = len(line.get_attribute("points").split())
            for bar in svg.find_elements(By.CSS_SELECTOR, "rect[data-series]"):
                name = bar.get_attribute("data-series")
                series[name] = series.get(name, 0) + 1
            box = svg.rect
            charts[svg.get_attribute("data-chart")] = {"width": box["width"], "height": box["height"], "series": series}
        result["charts"] = charts
        # Everything the page loaded: the file itself only (no script, style or font from elsewhere).
        resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        result["resources"] = resources
        # The whole page in one picture: the viewport set exactly (the window's size is not the page's).
        full = driver.execute_script("return Math.ceil(document.documentElement.getBoundingClientRect().height) + 24")
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": min(max(full, height), 4000), "deviceScaleFactor": 1, "mobile": False,
        })
        os.makedirs(os.path.dirname(os.path.abspath(screenshot)), exist_ok=True)
        driver.save_screenshot(screenshot)
        result["screenshot"] = screenshot
    finally:
        driver.quit()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
