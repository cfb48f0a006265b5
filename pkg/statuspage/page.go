package statuspage

// pageHTML is the page: styles and script inline, so that nothing is
// fetched from elsewhere. The script fetches the page again and swaps the
// content of #status, keeping the scroll position.
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>cqlgate status</title>
<style>
body{font-family:system-ui,sans-serif;margin:1.2em 1.5em;color:#222;background:#fff}
h1{font-size:1.3em;margin:0 0 .2em}h2{font-size:1.05em;margin:1.2em 0 .4em}
.panels{display:flex;flex-wrap:wrap;gap:0 2em;align-items:flex-start}
table{border-collapse:collapse;font-size:.9em}
td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:right;vertical-align:top}
th{background:#f4f4f4;font-weight:600;white-space:nowrap}td.l,th.l{text-align:left}
#statements td.l code{white-space:pre-wrap;word-break:break-word}
#statements tr:hover td{background:#f8f8ff}
.down,.bad{color:#b00;font-weight:bold}.up{color:#070}
code{font-size:.95em}small{color:#666}
</style>
</head>
<body>
<h1>cqlgate</h1>
<div id="status">
<small>as of <span id="at">{{.Time.Format "15:04:05"}}</span>; refreshes every 2 s{{if .Err}}; error: {{.Err}}{{end}}</small>
<div class="panels">
<section>
<h2>Cassandra nodes</h2>
<table id="nodes">
<tr><th class="l">node</th><th>state</th><th>in flight</th><th>limit</th><th>mean ms</th><th>p99 ms</th></tr>
{{range .Nodes}}<tr><td class="l">{{.Name}}</td><td class="{{if .Up}}up{{else}}down{{end}}">{{if .Up}}up{{else}}down{{end}}</td><td>{{.InFlight}}</td><td>{{.Limit}}</td><td>{{f2 .MeanMs}}</td><td>{{f2 .P99Ms}}</td></tr>
{{end}}</table>
</section>
<section>
<h2>Limiter</h2>
<table id="limiter">
<tr><th class="l">requests/s</th><td>{{f1 .RequestRate}}</td></tr>
<tr><th class="l">queue depth</th><td>{{.QueueDepth}}</td></tr>
<tr><th class="l">admitted after waiting</th><td>{{.QueueWaits}}</td></tr>
<tr><th class="l">their mean wait ms</th><td>{{f2 .QueueWaitMs}}</td></tr>
<tr><th class="l">longest wait allowed s</th><td>{{.QueueMaxWait}}</td></tr>
<tr><th class="l">OVERLOADED/s</th><td{{if .RejectRate}} class="bad"{{end}}>{{f1 .RejectRate}}</td></tr>
<tr><th class="l">rejected</th><td{{if .RejectedTotal}} class="bad"{{end}}>{{.RejectedTotal}}</td></tr>
{{range $reason, $n := .Rejected}}<tr><th class="l">rejected: {{$reason}}</th><td class="bad">{{$n}}</td></tr>
{{end}}</table>
</section>
<section>
<h2>Hedging</h2>
<table id="hedging">
<tr><th class="l">hedges/s</th><td>{{f1 .HedgeRate}}</td></tr>
<tr><th class="l">hedges sent</th><td>{{.Hedges}}</td></tr>
<tr><th class="l">won</th><td>{{.Wins}} ({{pct .Wins .Hedges}})</td></tr>
<tr><th class="l">allowed by the budget</th><td>{{.Budget}}</td></tr>
<tr><th class="l">paused</th><td>{{if .Paused}}yes: the limiter is rejecting{{else}}no{{end}}</td></tr>
</table>
</section>
</div>
{{with .Rules}}<h2>Rules</h2>
<table id="rules">
<tr><th class="l">rule</th><th>in flight</th><th>limit</th><th>queued</th><th>admitted</th><th>rejected: queue full</th><th>rejected: queue timeout</th></tr>
{{range .}}<tr><td class="l">{{.Name}}</td><td>{{.InFlight}}</td><td>{{.Limit}}</td><td>{{.Queued}}</td><td>{{.Admitted}}</td><td>{{.QueueFull}}</td><td>{{.Timeout}}</td></tr>
{{end}}</table>{{end}}
<h2>Top statements by total time</h2>
{{with .Statements}}<small>since {{.Since.Format "15:04:05"}}: {{.Entries}} statements kept (at most {{.MaxEntries}}, {{.Evictions}} evicted); all of them at <a href="statements?sort=p99">/statements</a></small>
<table id="statements">
<tr><th>calls</th><th>errors</th><th>rejected</th><th>rows</th><th>mean ms</th><th>p99 ms</th><th>max ms</th><th>queued ms</th><th>hedges/won</th><th class="l">table</th><th class="l">statement</th></tr>
{{range .Statements}}<tr><td>{{.Calls}}</td><td{{if .Errors}} class="bad"{{end}}>{{.Errors}}</td><td{{if .Rejected}} class="bad"{{end}}>{{.Rejected}}</td><td>{{.Rows}}</td><td>{{f2 .MeanMs}}</td><td>{{f2 .P99Ms}}</td><td>{{f2 .MaxMs}}</td><td>{{f1 .QueuedMs}}</td><td>{{.Hedges}}/{{.HedgeWins}}</td><td class="l">{{.Keyspace}}{{if .Table}}.{{.Table}}{{end}}</td><td class="l"><code title="{{.ID}}">{{.Text}}</code></td></tr>
{{end}}</table>{{else}}<p>Statement statistics are off (--statement-stats-entries 0).</p>{{end}}
</div>
<script>
(function(){
  function refresh(){
    fetch(location.href,{cache:"no-store"}).then(function(r){return r.text()}).then(function(t){
      var d=new DOMParser().parseFromString(t,"text/html").getElementById("status");
      if(d){document.getElementById("status").innerHTML=d.innerHTML}
    }).catch(function(){}).finally(function(){setTimeout(refresh,2000)});
  }
  setTimeout(refresh,2000);
})();
</script>
</body>
</html>
`
