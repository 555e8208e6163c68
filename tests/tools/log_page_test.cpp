// specjit log --html: the page of a real log (warm-up and serving compiles, a storm, strict
// refusals) is self-contained, and headless Chromium renders it to a screenshot that is not
// blank. Skips visibly when chromium is not installed (.ci/run installs it).
#include "cli_test_support.h"

#include <llvm/Support/FileSystem.h>

#include <cstdio>

using namespace specjit::test;

namespace {

// A log made by real processes: precompile (warm-up, with a storm), a sealed helper under
// SPECJIT_STRICT=warn (serving compiles) and one under SPECJIT_STRICT=error (refusals).
void make_real_log(const Cli& cli) {
  std::string manifest = cli.write("m.json", exact_manifest("[1, 2, 3, 4, 5]"));
  REQUIRE(cli.run({"precompile", "--manifest", manifest}, {"SPECJIT_STORM_THRESHOLD=3"})
              .exit_code == 0);
  std::vector<std::string> env = {"SPECJIT_CACHE_DIR=" + cli.cache(), "SPECJIT_LOG=" + cli.log(),
                                  "SPECJIT_ARCH=sm_90a", "SPECJIT_CACHE_READONLY_DIRS="};
  std::vector<std::string> serve = {SPECJIT_TEST_HELPER, "prepare", "--policy", "exact",
                                    "--cols", "64", "--first", "6", "--last", "7", "--seal"};
  std::vector<std::string> warn_env = env, error_env = env;
  warn_env.push_back("SPECJIT_STRICT=warn");
  error_env.push_back("SPECJIT_STRICT=error");
  CHECK(run_process(serve, warn_env).exit_code == 0);
  serve[7] = "8";
  serve[9] = "9";
  run_process(serve, error_env); // refused: its exit code says so; the log is what matters
}

} // namespace

TEST_CASE("log --html writes one self-contained page with the timeline, storms and refusals") {
  Cli cli;
  make_real_log(cli);
  std::string page = cli.path("log.html");
  ProcessResult result = cli.run({"log", "--html", page});
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  std::string html = read_file(page);
  CHECK(html.find("<!DOCTYPE html>") == 0);
  CHECK(html.find("<svg") != std::string::npos);
  CHECK(html.find("warm-up compile") != std::string::npos);
  CHECK(html.find("storm: num_tokens") != std::string::npos);
  CHECK(html.find("refused (strict)") != std::string::npos);
  CHECK(html.find("serving)") != std::string::npos); // a serving compile's circle
  CHECK(html.find("Slowest compiles") != std::string::npos);
  CHECK(html.find("new_variant") != std::string::npos); // a reason in the slowest table
  // Self-contained: nothing is fetched, nothing runs.
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("href=") == std::string::npos);
  CHECK(html.find("http://") == html.find("http://www.w3.org/2000/svg"));
}

TEST_CASE("headless Chromium renders the page of a real log to a screenshot that is not blank") {
  std::string chromium;
  for (const char* candidate : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (llvm::sys::fs::can_execute(candidate))
      chromium = candidate;
  if (chromium.empty()) {
    std::printf("[tools] SKIPPED log page screenshot: chromium is not installed "
                "(apt-get install chromium; .ci/run installs it)\n");
    return;
  }
  Cli cli;
  make_real_log(cli);
  std::string page = cli.path("log.html"), shot = cli.path("log-page.png");
  REQUIRE(cli.run({"log", "--html", page}).exit_code == 0);
  ProcessResult browser = run_process(
      {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
       "--no-first-run", "--user-data-dir=" + cli.path("profile"), "--screenshot=" + shot,
       "--window-size=1200,900", "file://" + page},
      {"HOME=" + cli.path("home")});
  INFO(browser.err);
  REQUIRE(llvm::sys::fs::exists(shot));
  ProcessResult colours =
      run_process({"/usr/bin/python3", std::string(SPECJIT_SOURCE_DIR) + "/tools/png_colours.py", shot});
  INFO(colours.err);
  REQUIRE(colours.exit_code == 0);
  CHECK(colours.out.find("width=1200 height=900") != std::string::npos);
  int count = 0;
  REQUIRE(std::sscanf(colours.out.c_str(), "colours=%d", &count) == 1);
  CHECK(count >= 8); // text, the phase colours, storm and refusal marks, table rules
  std::printf("[tools] log page screenshot: %s\n", colours.out.c_str());
  if (const char* keep = std::getenv("SPECJIT_KEEP_LOG_PAGE")) // docs/log-page.png is made so
    llvm::sys::fs::copy_file(shot, keep);
}
