<%@ Page Language="C#" %>
<script runat="server">
    protected void Page_Load(object sender, EventArgs e)
    {
        Response.StatusCode = 404;
        Response.TrySkipIisCustomErrors = true;
    }
</script>
<!DOCTYPE html>
<html><head><title>Not found</title></head>
<body><h1>There is no such page.</h1><p id="not-found-page">Try the <a href="/">home page</a>.</p></body></html>
