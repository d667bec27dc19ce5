"""Run a scenario exported by ``willitscale.fabric.export.scenario`` in SimGrid; print its time.

The worker of ``tests/parity/test_fabric_simgrid.py`` (not a test itself: pytest collects only
``test_*.py``). It runs under a Python that has SimGrid, usually not willitscale's venv (Debian:
``apt-get install python3-simgrid``, then ``/usr/bin/python3 tests/parity/simgrid_worker.py <
scenario.json``), and prints the completion time in seconds as JSON.

SimGrid is configured as a plain max-min fair flow model so the comparison is like for like:
``network/model:CM02`` (no LV08 bandwidth factor 0.97 / latency factor 13.01),
``network/TCP-gamma:0`` (no TCP window cap), ``network/crosstraffic:0`` (no ACK traffic on the
reverse path), ``network/weight-S:0`` (no RTT-based weights). Each directed link is one SimGrid
link (SHARED), so the two directions of a cable are independent, as in willitscale.
"""

import json
import sys

import simgrid


def main() -> None:
    sc = json.load(sys.stdin)
    e = simgrid.Engine([sys.argv[0], "--cfg=network/model:CM02", "--cfg=network/TCP-gamma:0",
                        "--cfg=network/crosstraffic:0", "--cfg=network/weight-S:0",
                        "--log=root.thres:critical"])
    zone = simgrid.NetZone.create_full_zone("fabric")
    hosts = [zone.create_host(f"gpu{i}", 1e9).seal() for i in range(sc["hosts"])]
    links = []
    for i, link in enumerate(sc["links"]):
        lk = zone.create_link(f"l{i}", link["bandwidth"])
        lk.set_latency(link["latency"])
        links.append(lk.seal())
    for r in sc["routes"]:
        zone.add_route(hosts[r["src"]].netpoint, hosts[r["dst"]].netpoint, None, None,
                       [simgrid.LinkInRoute(links[i]) for i in r["links"]], False)
    zone.seal()
    done = {}

    def driver():
        for p in sc["phases"]:
            for _ in range(p["repeat"]):
                comms = [simgrid.Comm.sendto_async(hosts[s], hosts[d], int(round(z)))
                         for s, d, z in zip(p["src"], p["dst"], p["size"])]
                simgrid.Comm.wait_all(comms)
        done["t"] = simgrid.Engine.clock

    simgrid.Actor.create("driver", hosts[0], driver)
    e.run()
    json.dump({"completion_time_s": done["t"]}, sys.stdout)


if __name__ == "__main__":
    main()
