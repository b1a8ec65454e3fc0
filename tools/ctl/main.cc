// estuaryctl: see ctl.h and README.md.
#include <csignal>
#include <iostream>

#include "tools/ctl/ctl.h"

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);
  return estuary::ctl::RunCtl(argc, argv, std::cout, std::cerr);
}
