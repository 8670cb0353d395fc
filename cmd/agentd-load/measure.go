package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	bridgev1 "github.com/agentd/agentd/gen/go/agentd/bridge/v1"
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
)

const (
	// goroutineSlack is how many goroutines above a reference count still
	// count as "back to rest": timers, HTTP/2 keepalive and the like come
	// and go.
	goroutineSlack = 10
	// sampleEvery is the monitor's period during the load; progressEvery
	// its progress lines on stderr.
	sampleEvery   = time.Second
	progressEvery = 10 * time.Second
	// shutdownWait bounds the wait for the client's and the server's
	// goroutines to end after shutdown.
	shutdownWait = 2 * time.Second
)

// measure runs the whole load run of o and returns its report. progress
// receives a line every progressEvery. Errors are failures to set the run
// up (agentd does not start, the warm-up generation fails); failures under
// load are in the report.
func measure(ctx context.Context, o options, progress io.Writer) (rep *report, err error) {
	start, err := startRequest(o.turns)
	if err != nil {
		return nil, err
	}
	rep = &report{Target: "in-process", Address: o.addr, Streams: o.streams, DurationS: o.duration.Seconds(), Turns: o.turns}
	var srv *fleet
	var proc processReport
	addrs := []string{o.addr}
	if o.addr != "" {
		rep.Target = "remote"
	} else {
		proc.Before = take(true)
		if srv, err = startLocal(o); err != nil {
			return nil, err
		}
		defer func() {
			// err is measure's result: a run that could not be measured
			// stops agentd and keeps its log.
			if err != nil {
				srv.Close()
				err = fmt.Errorf("%w (agentd's log: %s)", err, srv.logs())
			}
		}()
		addrs = srv.addrs()
		rep.Address = strings.Join(addrs, ", ")
		rep.Store = o.store.driver
	}

	d := &driver{start: start, turns: o.turns, timeout: o.timeout}
	c, err := dialAll(addrs, d)
	defer c.close()
	if err != nil {
		return nil, err
	}
	poolsBefore, err := warmUp(ctx, d, c.admins)
	if err != nil {
		return nil, err
	}
	if srv != nil {
		proc.Baseline = take(true)
	}

	fmt.Fprintf(progress, "agentd-load: %d streams for %s against %s agentd on %s\n", o.streams, o.duration, rep.Target, rep.Address)
	runLoad(ctx, o, d, rep, &proc, srv != nil, addrs, progress)

	sleep(ctx, o.settle)
	rep.SettleS = o.settle.Seconds()
	if rep.Pools, err = settledPools(ctx, c.admins, poolsBefore); err != nil {
		return nil, err
	}
	if srv != nil {
		proc.Settled = take(true)
	}
	c.close()

	if srv != nil {
		stopLocal(srv, rep, &proc)
	}
	rep.judge()
	if srv != nil {
		cleanUp(srv, rep, progress)
	}
	return rep, nil
}

// runLoad runs o's streams for o's duration, sampling this process (when
// it runs agentd, local) meanwhile, and reports the generations, each
// replica's among them.
func runLoad(ctx context.Context, o options, d *driver, rep *report, proc *processReport, local bool, addrs []string, progress io.Writer) {
	mon := startMonitor(d, local, proc.Baseline, progress)
	total, perReplica, elapsed := d.load(ctx, o.streams, o.duration)
	proc.Peak = mon.stop()
	if local {
		proc.End = take(false)
		proc.Peak = proc.Peak.max(proc.End)
	}
	rep.fill(total, elapsed)
	if len(addrs) > 1 {
		for i, addr := range addrs {
			rep.Replicas = append(rep.Replicas, replicaReport{Address: addr, Generations: perReplica[i]})
		}
	}
}

// startLocal starts o's agentd replicas in this process's executable.
func startLocal(o options) (*fleet, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	srv, err := startAgentds(exe, o.replicas, o.store, o.metrics)
	if err != nil {
		return nil, fmt.Errorf("starting agentd: %w", err)
	}
	return srv, nil
}

// clients are the load's connections, one per agentd, and each one's
// bridge admin client.
type clients struct {
	conns  []*grpc.ClientConn
	admins []bridgev1.BridgeAdminServiceClient
}

// dialAll connects to each of addrs, giving d a generation client of
// each.
func dialAll(addrs []string, d *driver) (*clients, error) {
	c := &clients{}
	for _, addr := range addrs {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return c, err
		}
		c.conns = append(c.conns, conn)
		d.clients = append(d.clients, agentdv1.NewAgentServiceClient(conn))
		c.admins = append(c.admins, bridgev1.NewBridgeAdminServiceClient(conn))
	}
	return c, nil
}

// close closes the connections; it may be called again.
func (c *clients) close() {
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

// warmUp runs one generation on each agentd, and returns the pools'
// counts after it.
func warmUp(ctx context.Context, d *driver, admins []bridgev1.BridgeAdminServiceClient) ([][]*bridgev1.PoolStats, error) {
	poolsBefore := make([][]*bridgev1.PoolStats, len(admins))
	for i, client := range d.clients {
		if _, err := d.generate(ctx, client, d.start); err != nil {
			return nil, fmt.Errorf("the warm-up generation failed: %w", err)
		}
		var err error
		if poolsBefore[i], err = poolStats(ctx, admins[i]); err != nil {
			return nil, err
		}
	}
	return poolsBefore, nil
}

// settledPools reports each agentd's pools once the load has settled,
// against their counts before it; each names its replica when there are
// several.
func settledPools(ctx context.Context, admins []bridgev1.BridgeAdminServiceClient, poolsBefore [][]*bridgev1.PoolStats) ([]poolReport, error) {
	var out []poolReport
	for i, admin := range admins {
		poolsAfter, err := poolStats(context.WithoutCancel(ctx), admin)
		if err != nil {
			return nil, err
		}
		pools := poolReports(poolsBefore[i], poolsAfter)
		if len(admins) > 1 {
			for j := range pools {
				pools[j].Replica = i + 1
			}
		}
		out = append(out, pools...)
	}
	return out, nil
}

// stopLocal stops the agentd replicas and records the process at
// shutdown: its goroutines once they have ended (or shutdownWait has
// passed), its peak resident memory and whether Serve failed.
func stopLocal(srv *fleet, rep *report, proc *processReport) {
	serveErr := srv.Close()
	rep.MetricsScrapes = srv.scraper.scrapes
	proc.Shutdown = take(false)
	deadline := time.Now().Add(shutdownWait)
	for proc.Shutdown.Goroutines > proc.Before.Goroutines+goroutineSlack && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		proc.Shutdown.Goroutines = take(false).Goroutines
	}
	proc.HWM, _ = statusBytes("VmHWM")
	rep.Process = proc
	if serveErr != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("agentd's Serve failed: %v", serveErr))
	}
}

// cleanUp removes the replicas' state after a run that passed, and keeps
// their log in the report of one that failed.
func cleanUp(srv *fleet, rep *report, progress io.Writer) {
	if !rep.OK {
		rep.Log = srv.logs()
		return
	}
	if err := srv.removeState(); err != nil {
		fmt.Fprintf(progress, "agentd-load: %v\n", err)
	}
}

// poolStats reads the bridge's pools through its admin API; nil when the
// agentd does not serve it (a remote bridge).
func poolStats(ctx context.Context, admin bridgev1.BridgeAdminServiceClient) ([]*bridgev1.PoolStats, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := admin.GetPoolStats(ctx, &bridgev1.GetPoolStatsRequest{})
	if status.Code(err) == codes.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("GetPoolStats: %w", err)
	}
	return res.GetPools(), nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// monitor samples the process every second during the load, keeping the
// peaks, and writes a progress line every ten seconds.
type monitor struct {
	quit chan struct{}
	done chan struct{}
	peak snapshot // written by the monitor's goroutine until done closes
}

// startMonitor starts the monitor; sampling says whether this process is
// the agentd (otherwise only progress is written).
func startMonitor(d *driver, sampling bool, baseline snapshot, progress io.Writer) *monitor {
	m := &monitor{quit: make(chan struct{}), done: make(chan struct{}), peak: baseline}
	began := time.Now()
	go func() {
		defer close(m.done)
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		var last snapshot
		for n := 1; ; n++ {
			select {
			case <-m.quit:
				return
			case <-tick.C:
			}
			if sampling {
				last = take(false)
				m.peak = m.peak.max(last)
			}
			if time.Duration(n)*sampleEvery%progressEvery != 0 {
				continue
			}
			line := fmt.Sprintf("  %3.0fs: %d completed, %d failed", time.Since(began).Seconds(), d.completed.Load(), d.failed.Load())
			if sampling {
				line += fmt.Sprintf("; RSS %s, %d goroutines, %d children", mib(last.RSS), last.Goroutines, last.Children)
			}
			fmt.Fprintln(progress, line)
		}
	}()
	return m
}

// stop ends the monitor and returns the peaks it saw.
func (m *monitor) stop() snapshot {
	close(m.quit)
	<-m.done
	return m.peak
}
