#!/usr/bin/env bash
# Debian's haproxy for the multi-node tests (tests/service/test_multi_node.py: three service processes behind one
# load balancer); see apt_install.sh.
exec bash "$(dirname "$0")/apt_install.sh" install_haproxy "the multi-node tests" haproxy haproxy
